// symmkit/core/cluster.cuh: thread block clusters (sm_90): a CTA's rank and count in its cluster, the
// cluster-wide barrier, and stores into a cluster peer's shared memory (distributed shared memory).
//
// Contract: every CTA of a cluster runs at the same time, so one may store into another's shared memory;
// cluster_sync orders what every thread of the cluster did before it (a peer's shared memory included)
// before what any does after it. A CTA launched without a cluster is a cluster of one. A CTA must not exit
// while a peer may still store into its shared memory: the kernel meets at cluster_sync first. No state.
#pragma once
#include "symmkit/core/types.cuh"

namespace symmkit {

/** This CTA's rank in its cluster. */
__device__ __forceinline__ u32 cluster_cta_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

/** CTAs in this CTA's cluster. */
__device__ __forceinline__ u32 cluster_ctas() {
  u32 n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}

/** Barrier over every thread of the cluster (threads that exited count as arrived); what a thread did
 * before it is visible to every thread of the cluster after it. */
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

/** Stores v at `p`'s offset in the shared memory of cluster CTA `cta`. */
__device__ __forceinline__ void st_cluster_f32(float* p, u32 cta, float v) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\nst.shared::cluster.f32 [remote], %2;\n}"
               ::"r"(static_cast<u32>(__cvta_generic_to_shared(p))), "r"(cta), "f"(v)
               : "memory");
}

}  // namespace symmkit
