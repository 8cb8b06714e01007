/** Ids of new nodes, chosen so that a node's entries land together in the indexes. */
const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";
/** The same 32 characters in ASCII order: digit i sorts before digit i + 1. */
const SORTED_BASE32 = "234567abcdefghijklmnopqrstuvwxyz";

/**
 * A new node's id: `node-` + 8 base32 characters of a countdown of the time (2^40 − 1 − ms mod
 * 2^40, big-endian, digits in ASCII order so that the strings sort as the numbers) + 8 random
 * ones (40 bits), the syntax of `newId`. A node created later
 * sorts before the nodes before it, so it is `node_a` of each pair it gets when it joins a mesh
 * and its n − 1 entries of `mesh_pairs`' `UNIQUE (node_a, node_b)` lie together, on a few
 * pages, instead of one in each other node's range (the 5,000-node build dirtied ~n/2 pages
 * per write otherwise; docs/history/decisions-2026.md "the 5,000-node build"). The
 * countdown wraps every 34.8 years. Node ids are names, not secrets (DESIGN §3 Ids).
 */
export function newNodeId(now: number): string {
  const countdown = 2 ** 40 - 1 - (now % 2 ** 40);
  let out = "node-";
  for (let shift = 35; shift >= 0; shift -= 5) out += SORTED_BASE32[Math.floor(countdown / 2 ** shift) % 32];
  for (const b of globalThis.crypto.getRandomValues(new Uint8Array(8))) out += BASE32[b & 31];
  return out;
}
