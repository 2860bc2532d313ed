// libnvidia-ml: only what tells how two GPUs are linked (the driver API cannot say "NVLink").
import { SymmkitError } from "../errors.js";
import { bindAll, defineAliases, type Ptr } from "./native.js";
import { openLibrary } from "./discovery.js";

defineAliases({ nvmlReturn_t: "int", nvmlDevice_t: "void *" });

export const NVML_DECLARATIONS = {
  nvmlInit_v2: "nvmlReturn_t nvmlInit_v2()",
  nvmlShutdown: "nvmlReturn_t nvmlShutdown()",
  nvmlErrorString: "const char *nvmlErrorString(nvmlReturn_t result)",
  nvmlSystemGetDriverVersion: "nvmlReturn_t nvmlSystemGetDriverVersion(void *version, unsigned int length)",
  nvmlDeviceGetHandleByPciBusId_v2:
    "nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, _Out_ nvmlDevice_t *device)",
  nvmlDeviceGetP2PStatus:
    "nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int capsIndex, _Out_ int *status)",
  nvmlDeviceGetNvLinkState:
    "nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, _Out_ int *isActive)",
} as const;

export interface Nvml {
  nvmlInit_v2(): number;
  nvmlShutdown(): number;
  nvmlErrorString(r: number): string;
  nvmlSystemGetDriverVersion(buf: Uint8Array, len: number): number;
  nvmlDeviceGetHandleByPciBusId_v2(busId: string, dev: [Ptr | null]): number;
  nvmlDeviceGetP2PStatus(a: Ptr, b: Ptr, caps: number, status: [number]): number;
  nvmlDeviceGetNvLinkState(dev: Ptr, link: number, active: [number]): number;
}

/** nvmlGpuP2PCapsIndex_t and nvmlGpuP2PStatus_t (nvml.h). */
export const NVML_P2P_CAPS_INDEX_NVLINK = 2;
export const NVML_P2P_STATUS_OK = 0;
export const NVML_NVLINK_MAX_LINKS = 18;
export const NVML_ERROR_NOT_SUPPORTED = 3;
export const NVML_ERROR_INVALID_ARGUMENT = 2;

let bound: Nvml | undefined;

export function nvml(): Nvml {
  if (!bound) {
    const found = openLibrary("nvml");
    bound = bindAll<Nvml>(found.lib, found.path, NVML_DECLARATIONS, "update the NVIDIA driver");
    check(bound.nvmlInit_v2(), "nvmlInit_v2");
  }
  return bound;
}

/** Throws unless `status` is NVML_SUCCESS. The one place NVML statuses are judged. */
export function check(status: number, call: string): void {
  if (status !== 0) {
    throw new SymmkitError(
      "SYMMKIT_NVML_ERROR",
      `${call} failed: ${nvml().nvmlErrorString(status)} (${status})`,
    );
  }
}
