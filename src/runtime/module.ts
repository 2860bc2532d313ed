// A compiled program loaded on a device, and the kernels in it.
import { DisposedError, InvalidArgumentError } from "../errors.js";
import { check } from "../cuda/driver.js";
import { ptrOrZero, type Ptr } from "../cuda/native.js";
import { Device, driver } from "./device.js";
import { cachedProgram, compileProgram, type CompiledProgram, type CompileRequest } from "./jit/compiler.js";
import { Kernel, type ParamType } from "./kernel.js";

/** A program symmkit ships or a user writes: a source plus the kernels to instantiate from it. */
export interface ProgramSpec {
  /** Stable name, e.g. "symmkit/runtime/tensor_kernels"; also the NVRTC program name. */
  readonly name: string;
  readonly source: string;
  readonly nameExpressions: readonly string[];
  readonly options?: readonly string[];
  readonly includeDirs?: readonly string[];
}

export function compileRequest(spec: ProgramSpec, arch: string): CompileRequest {
  return {
    name: `${spec.name}.cu`,
    source: spec.source,
    nameExpressions: spec.nameExpressions,
    arch,
    ...(spec.options ? { options: spec.options } : {}),
    ...(spec.includeDirs ? { includeDirs: spec.includeDirs } : {}),
  };
}

const sameParam = (a: ParamType, b: ParamType): boolean =>
  a === b ||
  (typeof a === "object" &&
    typeof b === "object" &&
    a.bytes === b.bytes &&
    (a.align ?? 8) === (b.align ?? 8));

/** Parameter lists compared element by element (no serialisation: Module.kernel may be on a hot path). */
function sameParams(a: readonly ParamType[], b: readonly ParamType[]): boolean {
  return a === b || (a.length === b.length && a.every((p, i) => sameParam(p, b[i]!)));
}

export class Module implements Disposable {
  readonly device: Device;
  readonly program: CompiledProgram;
  #handle: Ptr;
  readonly #kernels = new Map<string, Kernel>();

  private constructor(device: Device, program: CompiledProgram, handle: Ptr) {
    this.device = device;
    this.program = program;
    this.#handle = handle;
  }

  static load(program: CompiledProgram, device: Device = Device.get()): Module {
    device.makeCurrent();
    const m: [Ptr | null] = [null];
    check(driver().cuModuleLoadData(m, program.cubin), "cuModuleLoadData");
    return new Module(device, program, ptrOrZero(m[0]));
  }

  /** Compiles `spec` for `device`'s exact architecture (through the cache) and loads it. */
  static compile(spec: ProgramSpec, device: Device = Device.get()): Module {
    return Module.load(compileProgram(compileRequest(spec, device.props.arch)), device);
  }

  /** The kernel for one of the program's name expressions, with its parameter list (one object per name). */
  kernel<const Ps extends readonly ParamType[]>(nameExpression: string, params: Ps): Kernel<Ps> {
    if (this.#handle === 0n) throw new DisposedError("Module");
    const known = this.#kernels.get(nameExpression);
    if (known) {
      if (!sameParams(known.params, params)) {
        throw new InvalidArgumentError(
          `${nameExpression} was already bound with parameters ${JSON.stringify(known.params)}`,
        );
      }
      return known as unknown as Kernel<Ps>;
    }
    const lowered = this.program.lowered[nameExpression];
    if (lowered === undefined) {
      throw new InvalidArgumentError(
        `${nameExpression} is not one of this program's name expressions: ${Object.keys(this.program.lowered).join(", ")}`,
      );
    }
    this.device.makeCurrent();
    const f: [Ptr | null] = [null];
    check(driver().cuModuleGetFunction(f, this.#handle, lowered), `cuModuleGetFunction(${nameExpression})`);
    const k = new Kernel(this.device, ptrOrZero(f[0]), nameExpression, params);
    this.#kernels.set(nameExpression, k);
    return k;
  }

  dispose(): void {
    if (this.#handle === 0n) return;
    for (const k of this.#kernels.values()) k.release();
    this.device.makeCurrent();
    check(driver().cuModuleUnload(this.#handle), "cuModuleUnload");
    this.#handle = 0n;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

const loaded = new Map<string, Module>();
const loadedKey = (spec: ProgramSpec, device: Device): string => `${device.ordinal}\u0000${spec.name}`;

/** symmkit's own programs: compiled and loaded once per (device, program), kept for the process. */
export function sharedModule(spec: ProgramSpec, device: Device): Module {
  const key = loadedKey(spec, device);
  let m = loaded.get(key);
  if (!m) {
    m = Module.compile(spec, device);
    loaded.set(key, m);
  }
  return m;
}

/** sharedModule where the program is loaded already or in the disk cache; undefined (nothing compiled)
 * where it is not: what a group loads ahead of its first calls. */
export function cachedSharedModule(spec: ProgramSpec, device: Device): Module | undefined {
  const key = loadedKey(spec, device);
  let m = loaded.get(key);
  if (!m) {
    const program = cachedProgram(compileRequest(spec, device.props.arch));
    if (!program) return undefined;
    m = Module.load(program, device);
    loaded.set(key, m);
  }
  return m;
}
