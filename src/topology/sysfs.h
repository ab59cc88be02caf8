// Small, forgiving readers for sysfs-style files: every function says whether
// it could read and parse, and never throws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace braid::topology {

// The first line of `path` without the newline; false if it cannot be opened.
bool readLine(const std::string& path, std::string* out);

// A decimal integer (may be negative) filling the whole first line.
bool readInt(const std::string& path, long long* out);

// A hexadecimal number with or without "0x" ("0x10de", "0x030200").
bool readHex(const std::string& path, uint32_t* out);

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; an empty string is an empty list.
bool parseCpuList(const std::string& text, std::vector<int>* out);

// "10 21 21 10" -> {10,21,21,10}.
bool parseIntList(const std::string& text, std::vector<int>* out);

// Names in `dir` (no "." / ".."), sorted; those starting with `prefix` only.
std::vector<std::string> listDir(const std::string& dir, const std::string& prefix = "");

// "node12" with prefix "node" -> 12; false unless the rest is all digits.
bool numberAfter(const std::string& name, const std::string& prefix, int* out);

// True for a PCI address "dddd:bb:dd.f".
bool isPciBusId(const std::string& s);

// The PCI functions on the way from the root complex to what `link` resolves
// to, joined by '/' ("0000:00:01.0/0000:3b:00.0"); empty if none.
std::string pciChain(const std::string& link);

// The last PCI function on that way (the device a net or IB device sits on).
std::string pciBusIdOf(const std::string& link);

// "0-1,4" for {0,1,4}.
std::string formatCpuList(const std::vector<int>& cpus);

}  // namespace braid::topology
