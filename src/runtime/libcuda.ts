// libcuda as the runtime uses it: bound, and initialised (cuInit) on first use, once per process.
import { check, cuda, type Driver } from "../cuda/driver.js";

let initialised = false;

/** libcuda, bound and initialised (cuInit) once. */
export function driver(): Driver {
  const d = cuda();
  if (!initialised) {
    check(d.cuInit(0), "cuInit");
    initialised = true;
  }
  return d;
}
