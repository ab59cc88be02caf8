// cudaGetErrorName and cudaGetErrorString of the fake runtime: every code of
// the toolkit's cudaError enum, each described by the first sentence of the
// header's own comment (table generated from driver_types.h; enum names, so
// the values are the header's).
#include <cuda_runtime_api.h>

#include <utility>

namespace {

std::pair<const char*, const char*> describe(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return {"cudaSuccess", "The API call returned with no errors"};
    case cudaErrorInvalidValue: return {"cudaErrorInvalidValue", "This indicates that one or more of the parameters passed to the API call is not within an acceptable range..."};
    case cudaErrorMemoryAllocation: return {"cudaErrorMemoryAllocation", "The API call failed because it was unable to allocate enough memory or other resources to perform the..."};
    case cudaErrorInitializationError: return {"cudaErrorInitializationError", "The API call failed because the CUDA driver and runtime could not be initialized"};
    case cudaErrorCudartUnloading: return {"cudaErrorCudartUnloading", "This indicates that a CUDA Runtime API call cannot be executed because it is being called during process..."};
    case cudaErrorProfilerDisabled: return {"cudaErrorProfilerDisabled", "This indicates profiler is not initialized for this run"};
    case cudaErrorProfilerNotInitialized: return {"cudaErrorProfilerNotInitialized", "Deprecated: This error return is deprecated as of CUDA 5.0. It is no longer an error to attempt to..."};
    case cudaErrorProfilerAlreadyStarted: return {"cudaErrorProfilerAlreadyStarted", "Deprecated: This error return is deprecated as of CUDA 5.0. It is no longer an error to call..."};
    case cudaErrorProfilerAlreadyStopped: return {"cudaErrorProfilerAlreadyStopped", "Deprecated: This error return is deprecated as of CUDA 5.0. It is no longer an error to call..."};
    case cudaErrorInvalidConfiguration: return {"cudaErrorInvalidConfiguration", "This indicates that a kernel launch is requesting resources that can never be satisfied by the current device"};
    case cudaErrorInvalidPitchValue: return {"cudaErrorInvalidPitchValue", "This indicates that one or more of the pitch-related parameters passed to the API call is not within the..."};
    case cudaErrorInvalidSymbol: return {"cudaErrorInvalidSymbol", "This indicates that the symbol name/identifier passed to the API call is not a valid name or identifier"};
    case cudaErrorInvalidHostPointer: return {"cudaErrorInvalidHostPointer", "This indicates that at least one host pointer passed to the API call is not a valid host pointer"};
    case cudaErrorInvalidDevicePointer: return {"cudaErrorInvalidDevicePointer", "This indicates that at least one device pointer passed to the API call is not a valid device pointer"};
    case cudaErrorInvalidTexture: return {"cudaErrorInvalidTexture", "This indicates that the texture passed to the API call is not a valid texture"};
    case cudaErrorInvalidTextureBinding: return {"cudaErrorInvalidTextureBinding", "This indicates that the texture binding is not valid"};
    case cudaErrorInvalidChannelDescriptor: return {"cudaErrorInvalidChannelDescriptor", "This indicates that the channel descriptor passed to the API call is not valid"};
    case cudaErrorInvalidMemcpyDirection: return {"cudaErrorInvalidMemcpyDirection", "This indicates that the direction of the memcpy passed to the API call is not one of the types specified..."};
    case cudaErrorAddressOfConstant: return {"cudaErrorAddressOfConstant", "This indicated that the user has taken the address of a constant variable, which was forbidden up until..."};
    case cudaErrorTextureFetchFailed: return {"cudaErrorTextureFetchFailed", "This indicated that a texture fetch was not able to be performed"};
    case cudaErrorTextureNotBound: return {"cudaErrorTextureNotBound", "This indicated that a texture was not bound for access"};
    case cudaErrorSynchronizationError: return {"cudaErrorSynchronizationError", "This indicated that a synchronization operation had failed"};
    case cudaErrorInvalidFilterSetting: return {"cudaErrorInvalidFilterSetting", "This indicates that a non-float texture was being accessed with linear filtering"};
    case cudaErrorInvalidNormSetting: return {"cudaErrorInvalidNormSetting", "This indicates that an attempt was made to read an unsupported data type as a normalized float"};
    case cudaErrorMixedDeviceExecution: return {"cudaErrorMixedDeviceExecution", "Mixing of device and device emulation code was not allowed"};
    case cudaErrorNotYetImplemented: return {"cudaErrorNotYetImplemented", "This indicates that the API call is not yet implemented"};
    case cudaErrorMemoryValueTooLarge: return {"cudaErrorMemoryValueTooLarge", "This indicated that an emulated device pointer exceeded the 32-bit address range"};
    case cudaErrorStubLibrary: return {"cudaErrorStubLibrary", "This indicates that the CUDA driver that the application has loaded is a stub library"};
    case cudaErrorInsufficientDriver: return {"cudaErrorInsufficientDriver", "This indicates that the installed NVIDIA CUDA driver is older than the CUDA runtime library"};
    case cudaErrorCallRequiresNewerDriver: return {"cudaErrorCallRequiresNewerDriver", "This indicates that the API call requires a newer CUDA driver than the one currently installed"};
    case cudaErrorInvalidSurface: return {"cudaErrorInvalidSurface", "This indicates that the surface passed to the API call is not a valid surface"};
    case cudaErrorDuplicateVariableName: return {"cudaErrorDuplicateVariableName", "This indicates that multiple global or constant variables (across separate CUDA source files in the..."};
    case cudaErrorDuplicateTextureName: return {"cudaErrorDuplicateTextureName", "This indicates that multiple textures (across separate CUDA source files in the application) share the..."};
    case cudaErrorDuplicateSurfaceName: return {"cudaErrorDuplicateSurfaceName", "This indicates that multiple surfaces (across separate CUDA source files in the application) share the..."};
    case cudaErrorDevicesUnavailable: return {"cudaErrorDevicesUnavailable", "This indicates that all CUDA devices are busy or unavailable at the current time"};
    case cudaErrorIncompatibleDriverContext: return {"cudaErrorIncompatibleDriverContext", "This indicates that the current context is not compatible with this the CUDA Runtime"};
    case cudaErrorMissingConfiguration: return {"cudaErrorMissingConfiguration", "The device function being invoked (usually via cudaLaunchKernel()) was not previously configured via the..."};
    case cudaErrorPriorLaunchFailure: return {"cudaErrorPriorLaunchFailure", "This indicated that a previous kernel launch failed"};
    case cudaErrorLaunchMaxDepthExceeded: return {"cudaErrorLaunchMaxDepthExceeded", "This error indicates that a device runtime grid launch did not occur because the depth of the child grid..."};
    case cudaErrorLaunchFileScopedTex: return {"cudaErrorLaunchFileScopedTex", "This error indicates that a grid launch did not occur because the kernel uses file-scoped textures which..."};
    case cudaErrorLaunchFileScopedSurf: return {"cudaErrorLaunchFileScopedSurf", "This error indicates that a grid launch did not occur because the kernel uses file-scoped surfaces which..."};
    case cudaErrorSyncDepthExceeded: return {"cudaErrorSyncDepthExceeded", "This error indicates that a call to cudaDeviceSynchronize made from the device runtime failed because the..."};
    case cudaErrorLaunchPendingCountExceeded: return {"cudaErrorLaunchPendingCountExceeded", "This error indicates that a device runtime grid launch failed because the launch would exceed the limit..."};
    case cudaErrorInvalidDeviceFunction: return {"cudaErrorInvalidDeviceFunction", "The requested device function does not exist or is not compiled for the proper device architecture"};
    case cudaErrorNoDevice: return {"cudaErrorNoDevice", "This indicates that no CUDA-capable devices were detected by the installed CUDA driver"};
    case cudaErrorInvalidDevice: return {"cudaErrorInvalidDevice", "This indicates that the device ordinal supplied by the user does not correspond to a valid CUDA device or..."};
    case cudaErrorDeviceNotLicensed: return {"cudaErrorDeviceNotLicensed", "This indicates that the device doesn't have a valid Grid License"};
    case cudaErrorSoftwareValidityNotEstablished: return {"cudaErrorSoftwareValidityNotEstablished", "By default, the CUDA runtime may perform a minimal set of self-tests, as well as CUDA driver tests, to..."};
    case cudaErrorStartupFailure: return {"cudaErrorStartupFailure", "This indicates an internal startup failure in the CUDA runtime"};
    case cudaErrorInvalidKernelImage: return {"cudaErrorInvalidKernelImage", "This indicates that the device kernel image is invalid"};
    case cudaErrorDeviceUninitialized: return {"cudaErrorDeviceUninitialized", "This most frequently indicates that there is no context bound to the current thread"};
    case cudaErrorMapBufferObjectFailed: return {"cudaErrorMapBufferObjectFailed", "This indicates that the buffer object could not be mapped"};
    case cudaErrorUnmapBufferObjectFailed: return {"cudaErrorUnmapBufferObjectFailed", "This indicates that the buffer object could not be unmapped"};
    case cudaErrorArrayIsMapped: return {"cudaErrorArrayIsMapped", "This indicates that the specified array is currently mapped and thus cannot be destroyed"};
    case cudaErrorAlreadyMapped: return {"cudaErrorAlreadyMapped", "This indicates that the resource is already mapped"};
    case cudaErrorNoKernelImageForDevice: return {"cudaErrorNoKernelImageForDevice", "This indicates that there is no kernel image available that is suitable for the device"};
    case cudaErrorAlreadyAcquired: return {"cudaErrorAlreadyAcquired", "This indicates that a resource has already been acquired"};
    case cudaErrorNotMapped: return {"cudaErrorNotMapped", "This indicates that a resource is not mapped"};
    case cudaErrorNotMappedAsArray: return {"cudaErrorNotMappedAsArray", "This indicates that a mapped resource is not available for access as an array"};
    case cudaErrorNotMappedAsPointer: return {"cudaErrorNotMappedAsPointer", "This indicates that a mapped resource is not available for access as a pointer"};
    case cudaErrorECCUncorrectable: return {"cudaErrorECCUncorrectable", "This indicates that an uncorrectable ECC error was detected during execution"};
    case cudaErrorUnsupportedLimit: return {"cudaErrorUnsupportedLimit", "This indicates that the cudaLimit passed to the API call is not supported by the active device"};
    case cudaErrorDeviceAlreadyInUse: return {"cudaErrorDeviceAlreadyInUse", "This indicates that a call tried to access an exclusive-thread device that is already in use by a..."};
    case cudaErrorPeerAccessUnsupported: return {"cudaErrorPeerAccessUnsupported", "This error indicates that P2P access is not supported across the given devices"};
    case cudaErrorInvalidPtx: return {"cudaErrorInvalidPtx", "A PTX compilation failed"};
    case cudaErrorInvalidGraphicsContext: return {"cudaErrorInvalidGraphicsContext", "This indicates an error with the OpenGL or DirectX context"};
    case cudaErrorNvlinkUncorrectable: return {"cudaErrorNvlinkUncorrectable", "This indicates that an uncorrectable NVLink error was detected during the execution"};
    case cudaErrorJitCompilerNotFound: return {"cudaErrorJitCompilerNotFound", "This indicates that the PTX JIT compiler library was not found"};
    case cudaErrorUnsupportedPtxVersion: return {"cudaErrorUnsupportedPtxVersion", "This indicates that the provided PTX was compiled with an unsupported toolchain"};
    case cudaErrorJitCompilationDisabled: return {"cudaErrorJitCompilationDisabled", "This indicates that the JIT compilation was disabled"};
    case cudaErrorUnsupportedExecAffinity: return {"cudaErrorUnsupportedExecAffinity", "This indicates that the provided execution affinity is not supported by the device"};
    case cudaErrorUnsupportedDevSideSync: return {"cudaErrorUnsupportedDevSideSync", "This indicates that the code to be compiled by the PTX JIT contains unsupported call to cudaDeviceSynchronize"};
    case cudaErrorContained: return {"cudaErrorContained", "This indicates that an exception occurred on the device that is now contained by the GPU's error..."};
    case cudaErrorInvalidSource: return {"cudaErrorInvalidSource", "This indicates that the device kernel source is invalid"};
    case cudaErrorFileNotFound: return {"cudaErrorFileNotFound", "This indicates that the file specified was not found"};
    case cudaErrorSharedObjectSymbolNotFound: return {"cudaErrorSharedObjectSymbolNotFound", "This indicates that a link to a shared object failed to resolve"};
    case cudaErrorSharedObjectInitFailed: return {"cudaErrorSharedObjectInitFailed", "This indicates that initialization of a shared object failed"};
    case cudaErrorOperatingSystem: return {"cudaErrorOperatingSystem", "This error indicates that an OS call failed"};
    case cudaErrorInvalidResourceHandle: return {"cudaErrorInvalidResourceHandle", "This indicates that a resource handle passed to the API call was not valid"};
    case cudaErrorIllegalState: return {"cudaErrorIllegalState", "This indicates that a resource required by the API call is not in a valid state to perform the requested..."};
    case cudaErrorLossyQuery: return {"cudaErrorLossyQuery", "This indicates an attempt was made to introspect an object in a way that would discard semantically..."};
    case cudaErrorSymbolNotFound: return {"cudaErrorSymbolNotFound", "This indicates that a named symbol was not found"};
    case cudaErrorNotReady: return {"cudaErrorNotReady", "This indicates that asynchronous operations issued previously have not completed yet"};
    case cudaErrorIllegalAddress: return {"cudaErrorIllegalAddress", "The device encountered a load or store instruction on an invalid memory address"};
    case cudaErrorLaunchOutOfResources: return {"cudaErrorLaunchOutOfResources", "This indicates that a launch did not occur because it did not have appropriate resources"};
    case cudaErrorLaunchTimeout: return {"cudaErrorLaunchTimeout", "This indicates that the device kernel took too long to execute"};
    case cudaErrorLaunchIncompatibleTexturing: return {"cudaErrorLaunchIncompatibleTexturing", "This error indicates a kernel launch that uses an incompatible texturing mode"};
    case cudaErrorPeerAccessAlreadyEnabled: return {"cudaErrorPeerAccessAlreadyEnabled", "This error indicates that a call to cudaDeviceEnablePeerAccess() is trying to re-enable peer addressing on..."};
    case cudaErrorPeerAccessNotEnabled: return {"cudaErrorPeerAccessNotEnabled", "This error indicates that cudaDeviceDisablePeerAccess() is trying to disable peer addressing which has not..."};
    case cudaErrorSetOnActiveProcess: return {"cudaErrorSetOnActiveProcess", "This indicates that the user has called cudaSetValidDevices(), cudaSetDeviceFlags(),..."};
    case cudaErrorContextIsDestroyed: return {"cudaErrorContextIsDestroyed", "This error indicates that the context current to the calling thread has been destroyed using cuCtxDestroy,..."};
    case cudaErrorAssert: return {"cudaErrorAssert", "An assert triggered in device code during kernel execution"};
    case cudaErrorTooManyPeers: return {"cudaErrorTooManyPeers", "This error indicates that the hardware resources required to enable peer access have been exhausted for..."};
    case cudaErrorHostMemoryAlreadyRegistered: return {"cudaErrorHostMemoryAlreadyRegistered", "This error indicates that the memory range passed to cudaHostRegister() has already been registered"};
    case cudaErrorHostMemoryNotRegistered: return {"cudaErrorHostMemoryNotRegistered", "This error indicates that the pointer passed to cudaHostUnregister() does not correspond to any currently..."};
    case cudaErrorHardwareStackError: return {"cudaErrorHardwareStackError", "Device encountered an error in the call stack during kernel execution, possibly due to stack corruption or..."};
    case cudaErrorIllegalInstruction: return {"cudaErrorIllegalInstruction", "The device encountered an illegal instruction during kernel execution This leaves the process in an..."};
    case cudaErrorMisalignedAddress: return {"cudaErrorMisalignedAddress", "The device encountered a load or store instruction on a memory address which is not aligned"};
    case cudaErrorInvalidAddressSpace: return {"cudaErrorInvalidAddressSpace", "While executing a kernel, the device encountered an instruction which can only operate on memory locations..."};
    case cudaErrorInvalidPc: return {"cudaErrorInvalidPc", "The device encountered an invalid program counter"};
    case cudaErrorLaunchFailure: return {"cudaErrorLaunchFailure", "An exception occurred on the device while executing a kernel"};
    case cudaErrorCooperativeLaunchTooLarge: return {"cudaErrorCooperativeLaunchTooLarge", "This error indicates that the number of blocks launched per grid for a kernel that was launched via either..."};
    case cudaErrorTensorMemoryLeak: return {"cudaErrorTensorMemoryLeak", "An exception occurred on the device while exiting a kernel using tensor memory: the tensor memory was not..."};
    case cudaErrorNotPermitted: return {"cudaErrorNotPermitted", "This error indicates the attempted operation is not permitted"};
    case cudaErrorNotSupported: return {"cudaErrorNotSupported", "This error indicates the attempted operation is not supported on the current system or device"};
    case cudaErrorSystemNotReady: return {"cudaErrorSystemNotReady", "This error indicates that the system is not yet ready to start any CUDA work"};
    case cudaErrorSystemDriverMismatch: return {"cudaErrorSystemDriverMismatch", "This error indicates that there is a mismatch between the versions of the display driver and the CUDA driver"};
    case cudaErrorCompatNotSupportedOnDevice: return {"cudaErrorCompatNotSupportedOnDevice", "This error indicates that the system was upgraded to run with forward compatibility but the visible..."};
    case cudaErrorMpsConnectionFailed: return {"cudaErrorMpsConnectionFailed", "This error indicates that the MPS client failed to connect to the MPS control daemon or the MPS server"};
    case cudaErrorMpsRpcFailure: return {"cudaErrorMpsRpcFailure", "This error indicates that the remote procedural call between the MPS server and the MPS client failed"};
    case cudaErrorMpsServerNotReady: return {"cudaErrorMpsServerNotReady", "This error indicates that the MPS server is not ready to accept new MPS client requests"};
    case cudaErrorMpsMaxClientsReached: return {"cudaErrorMpsMaxClientsReached", "This error indicates that the hardware resources required to create MPS client have been exhausted"};
    case cudaErrorMpsMaxConnectionsReached: return {"cudaErrorMpsMaxConnectionsReached", "This error indicates the the hardware resources required to device connections have been exhausted"};
    case cudaErrorMpsClientTerminated: return {"cudaErrorMpsClientTerminated", "This error indicates that the MPS client has been terminated by the server"};
    case cudaErrorCdpNotSupported: return {"cudaErrorCdpNotSupported", "This error indicates, that the program is using CUDA Dynamic Parallelism, but the current configuration,..."};
    case cudaErrorCdpVersionMismatch: return {"cudaErrorCdpVersionMismatch", "This error indicates, that the program contains an unsupported interaction between different versions of..."};
    case cudaErrorStreamCaptureUnsupported: return {"cudaErrorStreamCaptureUnsupported", "The operation is not permitted when the stream is capturing"};
    case cudaErrorStreamCaptureInvalidated: return {"cudaErrorStreamCaptureInvalidated", "The current capture sequence on the stream has been invalidated due to a previous error"};
    case cudaErrorStreamCaptureMerge: return {"cudaErrorStreamCaptureMerge", "The operation would have resulted in a merge of two independent capture sequences"};
    case cudaErrorStreamCaptureUnmatched: return {"cudaErrorStreamCaptureUnmatched", "The capture was not initiated in this stream"};
    case cudaErrorStreamCaptureUnjoined: return {"cudaErrorStreamCaptureUnjoined", "The capture sequence contains a fork that was not joined to the primary stream"};
    case cudaErrorStreamCaptureIsolation: return {"cudaErrorStreamCaptureIsolation", "A dependency would have been created which crosses the capture sequence boundary"};
    case cudaErrorStreamCaptureImplicit: return {"cudaErrorStreamCaptureImplicit", "The operation would have resulted in a disallowed implicit dependency on a current capture sequence from..."};
    case cudaErrorCapturedEvent: return {"cudaErrorCapturedEvent", "The operation is not permitted on an event which was last recorded in a capturing stream"};
    case cudaErrorStreamCaptureWrongThread: return {"cudaErrorStreamCaptureWrongThread", "A stream capture sequence not initiated with the cudaStreamCaptureModeRelaxed argument to..."};
    case cudaErrorTimeout: return {"cudaErrorTimeout", "This indicates that the wait operation has timed out"};
    case cudaErrorGraphExecUpdateFailure: return {"cudaErrorGraphExecUpdateFailure", "This error indicates that the graph update was not performed because it included changes which violated..."};
    case cudaErrorExternalDevice: return {"cudaErrorExternalDevice", "This indicates that an async error has occurred in a device outside of CUDA. If CUDA was waiting for an..."};
    case cudaErrorInvalidClusterSize: return {"cudaErrorInvalidClusterSize", "This indicates that a kernel launch error has occurred due to cluster misconfiguration"};
    case cudaErrorFunctionNotLoaded: return {"cudaErrorFunctionNotLoaded", "Indiciates a function handle is not loaded when calling an API that requires a loaded function"};
    case cudaErrorInvalidResourceType: return {"cudaErrorInvalidResourceType", "This error indicates one or more resources passed in are not valid resource types for the operation"};
    case cudaErrorInvalidResourceConfiguration: return {"cudaErrorInvalidResourceConfiguration", "This error indicates one or more resources are insufficient or non-applicable for the operation"};
    case cudaErrorUnknown: return {"cudaErrorUnknown", "This indicates that an unknown internal error has occurred"};
    default: return {"cudaErrorUnknown", "unrecognized error code"};
  }
}

}  // namespace

extern "C" {

const char* CUDARTAPI cudaGetErrorName(cudaError_t error) { return describe(error).first; }

const char* CUDARTAPI cudaGetErrorString(cudaError_t error) { return describe(error).second; }

}  // extern "C"
