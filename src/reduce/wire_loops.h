// The arithmetic of a step whose messages travel narrowed (a wire type,
// wire_format.h), over a piece of `count` values, group by group: the value
// of each element is f(widened message, local) when the step receives and
// has a local operand, the widened message alone when it only receives, or
// g(local) when it only sends; it is then narrowed into the outgoing message,
// replaced by that narrowing's widened value when the step keeps the owner's
// rounding, and stored. The values are float32, or bfloat16 under an fp8
// wire: loaded into float, computed in float, stored once. BRAID_HD:
// host_wire.cc builds it for the host's vector units; a plan kernel's block
// runs the same loops, each thread a share of the groups
// (kernels/executor/wire_step.h).
#pragma once

#include <cstdint>
#include <type_traits>

#include "reduce/op_dispatch.h"
#include "reduce/reduce_ops.h"
#include "reduce/wire_format.h"

// Lambdas of these loops are inlined where they are used, so that the AVX2
// build of host_wire.cc covers them (a lambda left out of line is built for
// the baseline CPU only).
#if defined(__CUDACC__) || !defined(__GNUC__)
#define BRAID_LAMBDA_INLINE
#else
#define BRAID_LAMBDA_INLINE __attribute__((always_inline))
#endif

namespace braid::reduce {

struct WirePiece {
  WireType wire = WireType::None;
  ncclDataType_t data = ncclFloat32;  // of src and dst: ncclFloat32, or ncclBfloat16 (fp8 wires)
  RedOp op;
  bool pre = false;             // local operand is a contribution (PreMulSum)
  bool post = false;            // the value is finished (SumPostDiv)
  bool round = false;           // stored values are the widened narrowing
  const uint8_t* in = nullptr;  // received message, or null
  uint8_t* out = nullptr;       // message to fill, or null
  const void* src = nullptr;    // local operand, or null
  void* dst = nullptr;          // where values go, or null
  uint64_t count = 0;
  // This thread's share: groups firstGroup, firstGroup + stride, ... (all: 0, 1).
  uint64_t firstGroup = 0;
  uint64_t stride = 1;
};

template <class Codec>
struct WireGroups {
  uint8_t* bytes;
  uint64_t codesAt;
  BRAID_HD BRAID_INLINE WireGroups(const void* p, uint64_t count)
      : bytes(static_cast<uint8_t*>(const_cast<void*>(p))), codesAt(wireHeaderBytes(Codec::kType, count)) {}
  BRAID_HD BRAID_INLINE uint8_t* codes(uint64_t group) const {
    return bytes + codesAt + group * kWireGroup * wireCodeBytes(Codec::kType);
  }
  BRAID_HD BRAID_INLINE uint8_t* header(uint64_t group) const { return bytes + 2 * group; }
};

// A codec may narrow a group and widen it back in one step (encodeRounded:
// the host's AVX2 codecs, which still hold the codes in registers); any
// other encodes, then decodes what it wrote. The same bits either way.
template <class Codec>
BRAID_HD constexpr auto hasEncodeRounded(int) -> decltype(&Codec::encodeRounded, true) {
  return true;
}
template <class Codec>
BRAID_HD constexpr bool hasEncodeRounded(long) {
  return false;
}
template <class Codec>
BRAID_HD BRAID_INLINE void encodeRounded(float* v, uint32_t m, uint8_t* codes, uint8_t* header) {
  if constexpr (hasEncodeRounded<Codec>(0)) {
    Codec::encodeRounded(v, m, codes, header);
  } else {
    Codec::encode(v, m, codes, header);
    Codec::decode(codes, header, m, v);
  }
}

// A codec may also run a hop's full group in registers (sumGroup, and
// sumGroupPair for two consecutive ones: the host's AVX2 fp8 codecs, for the
// sums they have in lanes): widen, sum, narrow and store without the group's
// array in between. Each returns false, with nothing written, where it does
// not take the group(s), and the loop then runs them as any.
template <class Codec, class Sum>
BRAID_HD constexpr auto sumsInRegisters(int) -> decltype(Codec::template sumsInRegisters<Sum>()) {
  return Codec::template sumsInRegisters<Sum>();
}
template <class Codec, class Sum>
BRAID_HD constexpr bool sumsInRegisters(long) {
  return false;
}

// One group: m values (32, or fewer for the last), value(v) fills them.
template <class Codec, class Data, class Value>
BRAID_HD BRAID_INLINE void wireGroup(const WirePiece& p, const WireGroups<Codec>& out, uint64_t gi, uint32_t m,
                                     Value value) {
  float v[kWireGroup];
  value(v, m);
  if (p.out != nullptr && p.round) {
    encodeRounded<Codec>(v, m, out.codes(gi), out.header(gi));
  } else if (p.out != nullptr) {
    Codec::encode(v, m, out.codes(gi), out.header(gi));
  } else if (p.round) {
    uint8_t codes[kWireGroup * 2];
    uint8_t header[2] = {0, 0};
    encodeRounded<Codec>(v, m, codes, header);
  }
  if (p.dst != nullptr) {
    Data* d = static_cast<Data*>(p.dst) + gi * kWireGroup;
    for (uint32_t j = 0; j < m; ++j) d[j] = Traits<Data>::store(v[j]);
  }
}

// Every group of the piece (this thread's share): full groups with the
// constant 32 (the loops unroll and vectorise), the short last one apart.
// A block's build keeps one loop per step shape (kBlockLoops): no second
// loop unrolled for full groups, and bfloat16 group by group (its encode and
// decode are encodeOne and decodeOne in a loop: the same bits) instead of the
// flat loops' five variants; inlined for every codec, datatype and functor,
// those made ptxas take minutes more. The host builds both shapes, and
// tests/reduce/wire_codecs_avx2_test.cc checks that they give the same bits.
#if defined(__CUDA_ARCH__)
inline constexpr bool kBlockLoops = true;
#else
inline constexpr bool kBlockLoops = false;
#endif

template <class Codec, class Data, bool kBlock, class Value>
BRAID_HD BRAID_INLINE void wireGroupsOf(const WirePiece& p, Value value) {
  const WireGroups<Codec> out(p.out, p.count);
  const uint64_t full = p.count / kWireGroup;
  const uint64_t groups = wireGroups(p.count);
  for (uint64_t gi = p.firstGroup; gi < groups; gi += p.stride) {
    if (!kBlock && gi < full) {
      wireGroup<Codec, Data>(p, out, gi, kWireGroup,
                             [&](float* v, uint32_t) BRAID_LAMBDA_INLINE { value(gi, v, kWireGroup); });
    } else {
      const uint32_t m = gi < full ? kWireGroup : uint32_t(p.count - gi * kWireGroup);
      wireGroup<Codec, Data>(p, out, gi, m, [&](float* v, uint32_t n) BRAID_LAMBDA_INLINE { value(gi, v, n); });
    }
  }
}

// The host's loops of float values where a group needs no array between
// the operands and the codec: a hop's sums in registers (sumsInRegisters),
// a send narrowing the local values where they lie, a receive widening
// straight into the output. The same bits as wireGroupsOf.
template <class Codec, class Sum>
BRAID_HD BRAID_INLINE void wireSumGroupsInRegisters(const WirePiece& p, const WireGroups<Codec>& in, Sum f) {
  const WireGroups<Codec> out(p.out, p.count);
  const float* src = static_cast<const float*>(p.src);
  float* dst = static_cast<float*>(p.dst);
  const uint64_t full = p.count / kWireGroup;
  const uint64_t groups = wireGroups(p.count);
  for (uint64_t gi = p.firstGroup; gi < groups;) {
    const uint64_t at = gi * kWireGroup;
    float* to = dst != nullptr ? dst + at : nullptr;
    if (p.stride == 1 && gi + 1 < full &&
        Codec::sumGroupPair(in.codes(gi), in.header(gi), src + at, f, out.codes(gi), out.header(gi), to, p.round)) {
      gi += 2;
      continue;
    }
    if (gi >= full ||
        !Codec::sumGroup(in.codes(gi), in.header(gi), src + at, f, out.codes(gi), out.header(gi), to, p.round)) {
      const uint32_t m = gi < full ? kWireGroup : uint32_t(p.count - at);
      wireGroup<Codec, float>(p, out, gi, m, [&](float* v, uint32_t n) BRAID_LAMBDA_INLINE {
        Codec::decode(in.codes(gi), in.header(gi), n, v);
        for (uint32_t j = 0; j < n; ++j) v[j] = f(v[j], src[at + j]);
      });
    }
    gi += p.stride;
  }
}

template <class Codec>
BRAID_HD BRAID_INLINE void wireEncodeDirect(const WirePiece& p) {
  const WireGroups<Codec> out(p.out, p.count);
  const float* src = static_cast<const float*>(p.src);
  const uint64_t full = p.count / kWireGroup;
  const uint64_t groups = wireGroups(p.count);
  for (uint64_t gi = p.firstGroup; gi < groups; gi += p.stride) {
    const uint32_t m = gi < full ? kWireGroup : uint32_t(p.count - gi * kWireGroup);
    Codec::encode(src + gi * kWireGroup, m, out.codes(gi), out.header(gi));
  }
}

template <class Codec>
BRAID_HD BRAID_INLINE void wireDecodeDirect(const WirePiece& p, const WireGroups<Codec>& in) {
  float* dst = static_cast<float*>(p.dst);
  const uint64_t full = p.count / kWireGroup;
  const uint64_t groups = wireGroups(p.count);
  for (uint64_t gi = p.firstGroup; gi < groups; gi += p.stride) {
    const uint32_t m = gi < full ? kWireGroup : uint32_t(p.count - gi * kWireGroup);
    Codec::decode(in.codes(gi), in.header(gi), m, dst + gi * kWireGroup);
  }
}

// An unscaled codec value by value: one flat loop over the piece where one
// thread runs it (the host), else over this thread's groups. value(i) is
// element i's value; kOut/kRound/kDst are the piece's flags, fixed per loop
// so that it vectorises.
template <class Codec, class Data, bool kOut, bool kRound, bool kDst, class Value>
BRAID_HD BRAID_INLINE void wireValues(const WirePiece& p, Value value) {
  using Code = typename Codec::Code;
  Code* out = reinterpret_cast<Code*>(p.out);
  Data* dst = static_cast<Data*>(p.dst);
  auto range = [&](uint64_t b, uint64_t e) BRAID_LAMBDA_INLINE {
    for (uint64_t i = b; i < e; ++i) {
      float x = value(i);
      if (kOut) {
        const Code c = Codec::encodeOne(x);
        out[i] = c;
        if (kRound) x = Codec::decodeOne(c);
      } else if (kRound) {
        x = Codec::decodeOne(Codec::encodeOne(x));
      }
      if (kDst) dst[i] = Traits<Data>::store(x);
    }
  };
  if (p.stride == 1 && p.firstGroup == 0) return range(0, p.count);
  for (uint64_t gi = p.firstGroup; gi * kWireGroup < p.count; gi += p.stride) {
    const uint64_t b = gi * kWireGroup;
    range(b, b + kWireGroup < p.count ? b + kWireGroup : p.count);
  }
}

template <class Codec, class Data, class Value>
BRAID_HD BRAID_INLINE void wireValuesOf(const WirePiece& p, Value value) {
  const bool out = p.out != nullptr, dst = p.dst != nullptr;
  if (out && p.round && dst) return wireValues<Codec, Data, true, true, true>(p, value);
  if (out && dst) return wireValues<Codec, Data, true, false, true>(p, value);
  if (out) return wireValues<Codec, Data, true, false, false>(p, value);
  if (p.round) return wireValues<Codec, Data, false, true, true>(p, value);
  return wireValues<Codec, Data, false, false, true>(p, value);
}

// `p.op` computes in float: for bfloat16 values its PreMulSum scalar is a
// float (wire_step.h converts it). kBlock: the loop shape (kBlockLoops).
template <class Codec, class Data = float, bool kBlock = kBlockLoops>
BRAID_HD BRAID_INLINE void runWirePieceAs(const WirePiece& p) {
  const Data* src = static_cast<const Data*>(p.src);
  if constexpr (!Codec::kScaled && !kBlock) {
    using Code = typename Codec::Code;
    const Code* in = reinterpret_cast<const Code*>(p.in);
    if (p.in != nullptr && p.src == nullptr) {
      wireValuesOf<Codec, Data>(p, [&](uint64_t i) BRAID_LAMBDA_INLINE { return Codec::decodeOne(in[i]); });
    } else if (p.in != nullptr) {
      withSumFn<float>(p.op, p.pre, p.post, [&](auto f) BRAID_LAMBDA_INLINE {
        wireValuesOf<Codec, Data>(p, [&](uint64_t i) BRAID_LAMBDA_INLINE {
          return f(Codec::decodeOne(in[i]), Traits<Data>::load(src[i]));
        });
      });
    } else {
      auto loop = [&](auto f) BRAID_LAMBDA_INLINE {
        wireValuesOf<Codec, Data>(p, [&](uint64_t i) BRAID_LAMBDA_INLINE { return f(Traits<Data>::load(src[i])); });
      };
      withCopyFn<float>(p.op, p.pre, p.post, loop,
                        [&]() BRAID_LAMBDA_INLINE { loop([](float x) BRAID_LAMBDA_INLINE { return x; }); });
    }
    return;
  }
  const WireGroups<Codec> in(p.in, p.count);
  constexpr bool kDirect = !kBlock && std::is_same<Data, float>::value;
  if (p.in != nullptr && p.src == nullptr) {
    if constexpr (kDirect) {
      if (p.out == nullptr && !p.round && p.dst != nullptr) return wireDecodeDirect<Codec>(p, in);
    }
    wireGroupsOf<Codec, Data, kBlock>(p, [&](uint64_t gi, float* v, uint32_t m) BRAID_LAMBDA_INLINE {
      Codec::decode(in.codes(gi), in.header(gi), m, v);
    });
  } else if (p.in != nullptr) {
    withSumFn<float>(p.op, p.pre, p.post, [&](auto f) BRAID_LAMBDA_INLINE {
      if constexpr (kDirect && sumsInRegisters<Codec, decltype(f)>(0)) {
        if (p.out != nullptr) return wireSumGroupsInRegisters<Codec>(p, in, f);
      }
      wireGroupsOf<Codec, Data, kBlock>(p, [&](uint64_t gi, float* v, uint32_t m) BRAID_LAMBDA_INLINE {
        Codec::decode(in.codes(gi), in.header(gi), m, v);
        const Data* s = src + gi * kWireGroup;
        for (uint32_t j = 0; j < m; ++j) v[j] = f(v[j], Traits<Data>::load(s[j]));
      });
    });
  } else {
    auto loop = [&](auto f) BRAID_LAMBDA_INLINE {
      wireGroupsOf<Codec, Data, kBlock>(p, [&](uint64_t gi, float* v, uint32_t m) BRAID_LAMBDA_INLINE {
        const Data* s = src + gi * kWireGroup;
        for (uint32_t j = 0; j < m; ++j) v[j] = f(Traits<Data>::load(s[j]));
      });
    };
    withCopyFn<float>(p.op, p.pre, p.post, loop, [&]() BRAID_LAMBDA_INLINE {
      if constexpr (kDirect) {
        if (p.out != nullptr && !p.round && p.dst == nullptr) return wireEncodeDirect<Codec>(p);
      }
      loop([](float x) BRAID_LAMBDA_INLINE { return x; });
    });
  }
}

// The host's entry: the piece on the calling thread, built for AVX2 where the
// CPU has it (host_wire.cc).
void runWirePieceOnHost(const WirePiece& p);

}  // namespace braid::reduce
