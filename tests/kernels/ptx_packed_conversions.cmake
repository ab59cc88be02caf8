# The plan kernel's wire steps narrow and widen with the GPU's paired
# conversions (src/reduce/wire_codecs_packed.h), not the portable codecs'
# integer steps: its PTX for sm_89+ must hold them for both fp8 formats and
# float16. Run as: cmake -DPTX=<file.ptx> -P ptx_packed_conversions.cmake
if(NOT EXISTS "${PTX}")
  message(FATAL_ERROR "no PTX at '${PTX}'")
endif()
file(READ "${PTX}" ptx)
string(REGEX MATCH "\\.target sm_[0-9]+" target "${ptx}")
string(REGEX REPLACE "\\.target sm_" "" sm "${target}")
if(sm LESS 89)
  message(STATUS "plan kernel PTX for sm_${sm}: fp8 conversions are instructions from sm_89; not checked")
  return()
endif()
set(missing "")
foreach(insn "cvt.rn.satfinite.e4m3x2.f32" "cvt.rn.satfinite.e5m2x2.f32" "cvt.rn.f16x2.e4m3x2"
             "cvt.rn.f16x2.e5m2x2" "cvt.rn.f16x2.f32")
  string(FIND "${ptx}" "${insn}" at)
  if(at EQUAL -1)
    list(APPEND missing "${insn}")
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "the plan kernel's wire codecs do not use the packed conversions: no ${missing} in ${PTX}")
endif()
message(STATUS "plan kernel PTX (sm_${sm}): packed fp8 and float16 conversions present")
