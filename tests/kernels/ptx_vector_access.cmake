# The plan kernel's copy and reduce loops move memory in 16-byte accesses
# (kernels/executor/element_ops.h: loadVec/storeVec): its PTX must hold
# 128-bit global loads and stores (ld/st.global.cg.v4.u32), for every
# datatype's steps. Run as: cmake -DPTX=<file.ptx> -P ptx_vector_access.cmake
if(NOT EXISTS "${PTX}")
  message(FATAL_ERROR "no PTX at '${PTX}'")
endif()
file(READ "${PTX}" ptx)
string(REGEX MATCHALL "ld\\.global\\.cg\\.v4\\.u32" loads "${ptx}")
string(REGEX MATCHALL "st\\.global\\.cg\\.v4\\.u32" stores "${ptx}")
string(REGEX MATCHALL "\\.entry [A-Za-z0-9_]+" entries "${ptx}")
list(LENGTH loads nloads)
list(LENGTH stores nstores)
message(STATUS "plan kernel PTX: ${nloads} 128-bit loads, ${nstores} 128-bit stores, entries: ${entries}")
# 12 datatypes, each with copy and reduce loops (one and two sources): far
# more than a dozen of each when the loops are vectorised, none when not.
if(nloads LESS 24 OR nstores LESS 24)
  message(FATAL_ERROR "the plan kernel's loops are not vectorised: ${nloads} ld.global.cg.v4.u32 and "
                      "${nstores} st.global.cg.v4.u32 in ${PTX}")
endif()
