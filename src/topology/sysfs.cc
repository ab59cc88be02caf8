#include "topology/sysfs.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace braid::topology {

namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool parseNonNegative(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  *out = std::atoi(s.c_str());
  return true;
}

bool isHexDigits(const std::string& s, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

}  // namespace

bool readLine(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  // A sysfs attribute the driver refuses (speed of a down link) opens but fails
  // to read: that is "unknown", not an empty value.
  if (!std::getline(in, line) && line.empty()) return false;
  *out = trim(line);
  return true;
}

bool readInt(const std::string& path, long long* out) {
  std::string s;
  if (!readLine(path, &s) || s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool readHex(const std::string& path, uint32_t* out) {
  std::string s;
  if (!readLine(path, &s)) return false;
  size_t from = (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 2 : 0;
  if (s.size() == from || s.size() - from > 8 || !isHexDigits(s, from, s.size())) return false;
  *out = static_cast<uint32_t>(std::strtoul(s.c_str() + from, nullptr, 16));
  return true;
}

bool parseCpuList(const std::string& text, std::vector<int>* out) {
  std::vector<int> cpus;
  std::string all = trim(text);
  if (all.empty()) {
    out->clear();
    return true;
  }
  std::stringstream in(all);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t dash = item.find('-');
    int lo = 0, hi = 0;
    if (dash == std::string::npos) {
      if (!parseNonNegative(item, &lo)) return false;
      hi = lo;
    } else if (!parseNonNegative(item.substr(0, dash), &lo) ||
               !parseNonNegative(item.substr(dash + 1), &hi) || hi < lo) {
      return false;
    }
    // A range wider than any machine is a corrupt file, not 10^9 CPUs.
    if (hi - lo > 65536) return false;
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  *out = std::move(cpus);
  return true;
}

bool parseIntList(const std::string& text, std::vector<int>* out) {
  std::vector<int> values;
  std::stringstream in(text);
  std::string word;
  while (in >> word) {
    errno = 0;
    char* end = nullptr;
    long v = std::strtol(word.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < -1000000 || v > 1000000) return false;
    values.push_back(static_cast<int>(v));
  }
  *out = std::move(values);
  return true;
}

std::vector<std::string> listDir(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) == 0) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool numberAfter(const std::string& name, const std::string& prefix, int* out) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  return parseNonNegative(name.substr(prefix.size()), out);
}

bool isPciBusId(const std::string& s) {
  // dddd:bb:dd.f
  return s.size() == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.' && isHexDigits(s, 0, 4) &&
         isHexDigits(s, 5, 7) && isHexDigits(s, 8, 10) && isHexDigits(s, 11, 12);
}

std::string pciChain(const std::string& link) {
  std::error_code ec;
  fs::path real = fs::canonical(link, ec);
  if (ec) return "";
  std::string chain;
  for (const auto& part : real) {
    std::string p = part.string();
    if (!isPciBusId(p)) continue;
    if (!chain.empty()) chain += '/';
    chain += p;
  }
  return chain;
}

std::string pciBusIdOf(const std::string& link) {
  std::string chain = pciChain(link);
  size_t slash = chain.rfind('/');
  return slash == std::string::npos ? chain : chain.substr(slash + 1);
}

std::string formatCpuList(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace braid::topology
