// cuBLASLt as matmul's baseline and second implementation. Row-major D[m, n] = A[m, k] * op(B) is the
// column-major D^T[n, m] = op(B)^T-as-stored * A^T-as-stored: cuBLAS's "A" is our B and its "B" is our A.
// One handle and one workspace per device; one plan (descriptors and the heuristic's first algorithm)
// per (dtypes, shape, B layout), kept for the process.
import { InvalidArgumentError } from "../../errors.js";
import {
  check,
  cublasLt,
  CUBLAS_COMPUTE_32F,
  CUBLAS_OP_N,
  CUBLAS_OP_T,
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
  CudaDataType,
  HEURISTIC_RESULT_BYTES,
  MatmulDescAttribute,
  MATMUL_ALGO_BYTES,
} from "../../cuda/cublaslt.js";
import { NativeBlock, ptrOrZero, type Ptr } from "../../cuda/native.js";
import type { Device } from "../../runtime/device.js";
import { DeviceMemory } from "../../runtime/memory.js";
import { defaultStream, type Stream } from "../../runtime/stream.js";

export const CUBLASLT_WORKSPACE_BYTES = 32 * 1024 * 1024;

export type LtElem = "bf16" | "fp8e4m3";
/** "nk": B is row-major [n, k] (nn.Linear weights); "kn": B is row-major [k, n]. */
export type BLayout = "nk" | "kn";

export interface LtMatmul {
  readonly elem: LtElem;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly layoutB: BLayout;
  readonly a: Ptr;
  readonly b: Ptr;
  /** bf16 [m, n], row-major, contiguous. */
  readonly d: Ptr;
  readonly scaleA?: Ptr;
  readonly scaleB?: Ptr;
  readonly stream?: Stream;
}

interface Plan {
  readonly desc: Ptr;
  readonly layouts: readonly [Ptr, Ptr, Ptr];
  readonly algo: NativeBlock;
}

const ELEM_TYPE: Record<LtElem, number> = { bf16: CudaDataType.R_16BF, fp8e4m3: CudaDataType.R_8F_E4M3 };

function u32(v: number): Uint32Array {
  return new Uint32Array([v]);
}

function ptrBytes(p: Ptr): BigUint64Array {
  return new BigUint64Array([p]);
}

export class CublasLtMatmul {
  readonly device: Device;
  readonly #handle: Ptr;
  readonly #workspace: DeviceMemory;
  readonly #plans = new Map<string, Plan>();
  /** alpha = 1, beta = 0 (f32, host memory: read when the call is made or captured). */
  readonly #scalars = new NativeBlock(8);

  private constructor(device: Device, handle: Ptr, workspace: DeviceMemory) {
    this.device = device;
    this.#handle = handle;
    this.#workspace = workspace;
    this.#scalars.view.setFloat32(0, 1, true);
    this.#scalars.view.setFloat32(4, 0, true);
  }

  static #perDevice = new Map<number, CublasLtMatmul>();

  /** The process's cuBLASLt context for `device` (handle and workspace made on first use). */
  static for(device: Device): CublasLtMatmul {
    let lt = CublasLtMatmul.#perDevice.get(device.ordinal);
    if (!lt) {
      device.makeCurrent();
      const h: [Ptr | null] = [null];
      check(cublasLt().cublasLtCreate(h), "cublasLtCreate");
      lt = new CublasLtMatmul(device, ptrOrZero(h[0]), DeviceMemory.alloc(CUBLASLT_WORKSPACE_BYTES, device));
      CublasLtMatmul.#perDevice.set(device.ordinal, lt);
    }
    return lt;
  }

  run(p: LtMatmul): void {
    if (p.elem === "fp8e4m3" && p.layoutB !== "nk") {
      throw new InvalidArgumentError('matmul: cuBLASLt fp8 needs B as [n, k] (layoutB "nk")');
    }
    const plan = this.#plan(p);
    const api = cublasLt();
    // Scale pointers live in the descriptor: set them for this call (cuBLAS's A is our B).
    if (p.elem === "fp8e4m3") {
      this.#setPointer(plan.desc, MatmulDescAttribute.A_SCALE_POINTER, p.scaleB ?? 0n);
      this.#setPointer(plan.desc, MatmulDescAttribute.B_SCALE_POINTER, p.scaleA ?? 0n);
    }
    const stream = p.stream ?? defaultStream(this.device);
    const [la, lb, ld] = plan.layouts;
    const s = this.#scalars.ptr;
    this.device.makeCurrent();
    check(
      api.cublasLtMatmul(
        this.#handle,
        plan.desc,
        s,
        p.b,
        la,
        p.a,
        lb,
        s + 4n,
        p.d,
        ld,
        p.d,
        ld,
        plan.algo.ptr,
        this.#workspace.ptr,
        this.#workspace.bytes,
        stream.handle,
      ),
      "cublasLtMatmul",
    );
  }

  #setPointer(desc: Ptr, attr: number, p: Ptr): void {
    check(
      cublasLt().cublasLtMatmulDescSetAttribute(desc, attr, ptrBytes(p), 8),
      "cublasLtMatmulDescSetAttribute",
    );
  }

  #plan(p: LtMatmul): Plan {
    const key = `${p.elem}/${p.m}/${p.n}/${p.k}/${p.layoutB}`;
    const known = this.#plans.get(key);
    if (known) return known;
    const api = cublasLt();
    const out = (): [Ptr | null] => [null];
    const d = out();
    check(
      api.cublasLtMatmulDescCreate(d, CUBLAS_COMPUTE_32F, CudaDataType.R_32F),
      "cublasLtMatmulDescCreate",
    );
    const desc = ptrOrZero(d[0]);
    const set = (attr: number, v: number): void =>
      check(api.cublasLtMatmulDescSetAttribute(desc, attr, u32(v), 4), "cublasLtMatmulDescSetAttribute");
    set(MatmulDescAttribute.TRANSA, p.layoutB === "nk" ? CUBLAS_OP_T : CUBLAS_OP_N);
    set(MatmulDescAttribute.TRANSB, CUBLAS_OP_N);
    // FAST_ACCUM is an int8_t: accumulate in the MMA unit only, as symmkit's GEMM does.
    if (p.elem === "fp8e4m3") {
      check(
        api.cublasLtMatmulDescSetAttribute(desc, MatmulDescAttribute.FAST_ACCUM, new Int8Array([1]), 1),
        "cublasLtMatmulDescSetAttribute(FAST_ACCUM)",
      );
    }
    const layout = (type: number, rows: number, cols: number, ld: number): Ptr => {
      const l = out();
      check(api.cublasLtMatrixLayoutCreate(l, type, rows, cols, ld), "cublasLtMatrixLayoutCreate");
      return ptrOrZero(l[0]);
    };
    const t = ELEM_TYPE[p.elem];
    const la = p.layoutB === "nk" ? layout(t, p.k, p.n, p.k) : layout(t, p.n, p.k, p.n);
    const lb = layout(t, p.k, p.m, p.k);
    const ld = layout(CudaDataType.R_16BF, p.n, p.m, p.n);

    const pr = out();
    check(api.cublasLtMatmulPreferenceCreate(pr), "cublasLtMatmulPreferenceCreate");
    const pref = ptrOrZero(pr[0]);
    const results = new NativeBlock(HEURISTIC_RESULT_BYTES);
    try {
      check(
        api.cublasLtMatmulPreferenceSetAttribute(
          pref,
          CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
          new BigUint64Array([BigInt(this.#workspace.bytes)]),
          8,
        ),
        "cublasLtMatmulPreferenceSetAttribute",
      );
      const returned: [number] = [0];
      check(
        api.cublasLtMatmulAlgoGetHeuristic(
          this.#handle,
          desc,
          la,
          lb,
          ld,
          ld,
          pref,
          1,
          results.ptr,
          returned,
        ),
        "cublasLtMatmulAlgoGetHeuristic",
      );
      if (returned[0] < 1) {
        throw new InvalidArgumentError(
          `matmul: cuBLASLt has no algorithm for ${p.elem} ${p.m}x${p.n}x${p.k} (B ${p.layoutB}); check the alignment of every row (16 bytes)`,
        );
      }
      const algo = new NativeBlock(MATMUL_ALGO_BYTES);
      algo.u8.set(results.u8.subarray(0, MATMUL_ALGO_BYTES));
      const plan: Plan = { desc, layouts: [la, lb, ld], algo };
      this.#plans.set(key, plan);
      return plan;
    } finally {
      results.free();
      check(api.cublasLtMatmulPreferenceDestroy(pref), "cublasLtMatmulPreferenceDestroy");
    }
  }
}
