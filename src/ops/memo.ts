// Values made once per key triple and kept, for eager call paths that must not build strings per call
// (kernel handles by kernel, dtype and op or slots).

/** Values made once per (a, b, c) by `make` and kept: three Map lookups a call, no key building. */
export class Memo3<A, B, C, V> {
  readonly #map = new Map<A, Map<B, Map<C, V>>>();
  readonly #make: (a: A, b: B, c: C) => V;
  constructor(make: (a: A, b: B, c: C) => V) {
    this.#make = make;
  }
  get(a: A, b: B, c: C): V {
    const v = this.#map.get(a)?.get(b)?.get(c);
    return v === undefined ? this.#add(a, b, c) : v;
  }
  #add(a: A, b: B, c: C): V {
    let mb = this.#map.get(a);
    if (!mb) this.#map.set(a, (mb = new Map<B, Map<C, V>>()));
    let mc = mb.get(b);
    if (!mc) mb.set(b, (mc = new Map<C, V>()));
    const v = this.#make(a, b, c);
    mc.set(c, v);
    return v;
  }
}
