// Every error symmkit throws is a SymmkitError with a stable `code`: programs branch on the code, people
// read the message, which says what went wrong and what to do about it.

export type ErrorCode =
  | "SYMMKIT_CUDA_ERROR"
  | "SYMMKIT_NVRTC_ERROR"
  | "SYMMKIT_NCCL_ERROR"
  | "SYMMKIT_CUBLAS_ERROR"
  | "SYMMKIT_NVML_ERROR"
  | "SYMMKIT_LIBRARY_NOT_FOUND"
  | "SYMMKIT_SYMBOL_MISSING"
  | "SYMMKIT_HEADERS_NOT_FOUND"
  | "SYMMKIT_NO_DEVICE"
  | "SYMMKIT_INVALID_ARGUMENT"
  | "SYMMKIT_DISPOSED"
  | "SYMMKIT_OUT_OF_MEMORY"
  | "SYMMKIT_UNSUPPORTED"
  | "SYMMKIT_STORE_TIMEOUT"
  | "SYMMKIT_STORE_CLOSED"
  | "SYMMKIT_STORE_REFUSED"
  | "SYMMKIT_STORE_PROTOCOL"
  | "SYMMKIT_OS_ERROR"
  | "SYMMKIT_SYMM_TIMEOUT"
  | "SYMMKIT_COLLECTIVE_MISMATCH"
  | "SYMMKIT_NCCL_TIMEOUT"
  | "SYMMKIT_KERNEL_STALL"
  | "SYMMKIT_ENVIRONMENT";

export class SymmkitError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A CUDA driver call failed. `status` is the CUresult, `errorName` the driver's name for it. */
export class CudaError extends SymmkitError {
  constructor(
    readonly call: string,
    readonly status: number,
    readonly errorName: string,
    readonly errorString: string,
    options?: ErrorOptions,
  ) {
    super("SYMMKIT_CUDA_ERROR", `${call} failed: ${errorName} (${status}): ${errorString}`, options);
  }
}

/** NVRTC failed; for a failed compile `log` holds the compiler's diagnostics. */
export class NvrtcError extends SymmkitError {
  constructor(
    readonly call: string,
    readonly status: number,
    readonly errorName: string,
    readonly log: string = "",
  ) {
    super("SYMMKIT_NVRTC_ERROR", `${call} failed: ${errorName} (${status})${log ? `\n${log}` : ""}`);
  }
}

/** A shared library was not found anywhere symmkit looks; `tried` lists every place, in order. */
export class LibraryNotFoundError extends SymmkitError {
  constructor(
    readonly library: string,
    readonly envVar: string,
    readonly tried: readonly string[],
  ) {
    super(
      "SYMMKIT_LIBRARY_NOT_FOUND",
      `${library} not found. Set ${envVar} to the library file or its directory. Tried, in order:\n` +
        tried.map((t) => `  ${t}`).join("\n"),
    );
  }
}

export class InvalidArgumentError extends SymmkitError {
  constructor(message: string) {
    super("SYMMKIT_INVALID_ARGUMENT", message);
  }
}

/** `what` was used after it was disposed; `todo` says what to use instead. */
export class DisposedError extends SymmkitError {
  constructor(what: string, todo = "create a new one") {
    super("SYMMKIT_DISPOSED", `${what} was already disposed; ${todo}`);
  }
}

/** Memory for a tensor could not be had (host or device); the message names the tensor and the size. */
export class OutOfMemoryError extends SymmkitError {
  constructor(message: string, options?: ErrorOptions) {
    super("SYMMKIT_OUT_OF_MEMORY", message, options);
  }
}

/** The request is valid but this device, library or implementation cannot serve it; the message says which can. */
export class UnsupportedError extends SymmkitError {
  constructor(message: string) {
    super("SYMMKIT_UNSUPPORTED", message);
  }
}
