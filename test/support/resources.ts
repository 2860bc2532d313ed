// What the CPU soak measures of each rank at the warm-up's end and at the end (test/cpu-soak.test.ts
// judges what test/fixtures/cpu-soak-rank.ts reports).
export interface Resources {
  fds: number;
  rssMiB: number;
  heapMiB: number;
  arrayBuffersMiB: number;
  symmkitMappings: number;
  shm: number;
}
