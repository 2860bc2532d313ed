// The program behind Tensor's random fills and 8-byte fills, and the empty kernel of the launch
// benchmark (device/include/symmkit/runtime/tensor_kernels.cuh).
import { DTYPES, type DType } from "./dtype.js";
import { sharedModule, type ProgramSpec } from "./module.js";
import type { Device } from "./device.js";

const FLOAT_DTYPES = (Object.keys(DTYPES) as DType[]).filter((d) => DTYPES[d].float);
const INT_DTYPES = (Object.keys(DTYPES) as DType[]).filter((d) => !DTYPES[d].float);

const cType = (d: DType): string => DTYPES[d].cType;

export const uniformExpr = (d: DType): string => `symmkit::rand_uniform<${cType(d)}>`;
export const normalExpr = (d: DType): string => `symmkit::rand_normal<${cType(d)}>`;
export const randIntExpr = (d: DType): string => `symmkit::rand_int<${cType(d)}>`;
export const FILL_U64 = "symmkit::fill_u64";
export const EMPTY_KERNEL = "symmkit::empty_kernel";

export const TENSOR_KERNELS: ProgramSpec = {
  name: "symmkit/runtime/tensor_kernels",
  source: '#include "symmkit/runtime/tensor_kernels.cuh"\n',
  nameExpressions: [
    ...FLOAT_DTYPES.map(uniformExpr),
    ...FLOAT_DTYPES.map(normalExpr),
    ...INT_DTYPES.map(randIntExpr),
    FILL_U64,
    EMPTY_KERNEL,
  ],
};

export const RAND_PARAMS = ["ptr", "u64", "u64", "u64", "f32", "f32"] as const;
export const RAND_INT_PARAMS = ["ptr", "u64", "u64", "u64", "i64", "u64"] as const;
export const FILL_PARAMS = ["ptr", "u64", "u64"] as const;

export function tensorKernels(device: Device) {
  return sharedModule(TENSOR_KERNELS, device);
}
