// The double binary tree: two binary trees over the same ranks, built so that
// every rank is a leaf in at least one of them (interior in at most one). Each
// tree carries half the data, so every rank sends and receives about n bytes in
// total, like a ring, but a value crosses only O(log p) hops.
//
// Tree 0 is the in-order tree over positions 0..m-1: with j = position + 1,
// a node's level is the number of trailing zero bits of j, leaves are the odd
// j (even positions), the root is the largest power of two <= m. Tree 1 places
// rank q at position m-1-q when m is even (a mirror: odd positions become
// leaves) and at q-1 (mod m) when m is odd (a shift, same effect).
#pragma once

namespace braid::schedule {

struct TreeLinks {
  int parent = -1;  // -1: the root of the tree
  int nchildren = 0;
  int children[2] = {-1, -1};
};

// Links of `rank` in tree `tree` (0 or 1) over all `nranks` ranks (AllReduce).
TreeLinks doubleTreeLinks(int nranks, int tree, int rank);

// Rooted variant (Broadcast, Reduce): the two trees span the nranks-1 ranks
// other than `root`, numbered from root+1 around; `root` sits above both and
// has the top of each tree as its single child in that tree.
TreeLinks rootedTreeLinks(int nranks, int root, int tree, int rank);

// Depth of the deeper tree in edges (rooted variant includes the root's edge).
int doubleTreeDepth(int nranks, bool rooted);

}  // namespace braid::schedule
