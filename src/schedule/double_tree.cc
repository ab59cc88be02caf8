#include "schedule/double_tree.h"

#include <algorithm>

namespace braid::schedule {

namespace {

int level(int j) { return __builtin_ctz(static_cast<unsigned>(j)); }

// The parent of 1-based j in the infinite in-order tree.
int upOne(int j) {
  const int h = level(j);
  return ((j >> (h + 1)) & 1) ? j - (1 << h) : j + (1 << h);
}

// Links between positions of the in-order tree over m nodes. Positions past
// the end are skipped: a parent beyond m is replaced by its nearest ancestor
// within m, and a right child beyond m by its leftmost descendant within m, so
// the two rules describe the same edges.
TreeLinks inorderLinks(int m, int pos) {
  TreeLinks t;
  const int j = pos + 1;
  int root = 1;
  while (root * 2 <= m) root *= 2;
  if (j != root) {
    int q = upOne(j);
    while (q > m) q = upOne(q);
    t.parent = q - 1;
  }
  const int h = level(j);
  if (h == 0) return t;
  t.children[t.nchildren++] = j - (1 << (h - 1)) - 1;
  int right = j + (1 << (h - 1));
  while (right > m && level(right) > 0) right -= 1 << (level(right) - 1);
  if (right <= m) t.children[t.nchildren++] = right - 1;
  return t;
}

// Tree 1's position of index q among m nodes, and back.
int toTreePos(int m, int tree, int q) {
  if (tree == 0) return q;
  return m % 2 == 0 ? m - 1 - q : (q - 1 + m) % m;
}
int fromTreePos(int m, int tree, int pos) {
  if (tree == 0) return pos;
  return m % 2 == 0 ? m - 1 - pos : (pos + 1) % m;
}

// Links of node index q (0..m-1) mapped through `toRank`.
template <typename ToRank>
TreeLinks linksOf(int m, int tree, int q, ToRank toRank) {
  TreeLinks t = inorderLinks(m, toTreePos(m, tree, q));
  if (t.parent >= 0) t.parent = toRank(fromTreePos(m, tree, t.parent));
  for (int c = 0; c < t.nchildren; ++c) t.children[c] = toRank(fromTreePos(m, tree, t.children[c]));
  return t;
}

}  // namespace

TreeLinks doubleTreeLinks(int nranks, int tree, int rank) {
  return linksOf(nranks, tree, rank, [](int q) { return q; });
}

TreeLinks rootedTreeLinks(int nranks, int root, int tree, int rank) {
  const int m = nranks - 1;
  TreeLinks t;
  if (m == 0) return t;
  auto toRank = [&](int q) { return (q + root + 1) % nranks; };
  if (rank == root) {
    int top = 1;
    while (top * 2 <= m) top *= 2;
    t.children[t.nchildren++] = toRank(fromTreePos(m, tree, top - 1));
    return t;
  }
  const int q = (rank - root - 1 + nranks) % nranks;
  t = linksOf(m, tree, q, toRank);
  if (t.parent < 0) t.parent = root;
  return t;
}

int doubleTreeDepth(int nranks, bool rooted) {
  int depth = 0;
  for (int tree = 0; tree < 2; ++tree)
    for (int r = 0; r < nranks; ++r) {
      int d = 0;
      for (int x = r;;) {
        TreeLinks t = rooted ? rootedTreeLinks(nranks, 0, tree, x) : doubleTreeLinks(nranks, tree, x);
        if (t.parent < 0) break;
        x = t.parent;
        ++d;
      }
      depth = std::max(depth, d);
    }
  return depth;
}

}  // namespace braid::schedule
