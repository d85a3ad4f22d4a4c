// Listings (and the drill tabs) wider than their box scroll sideways; at 375 px most do. A box cut at
// an edge says so: `data-cut` names the edges (`left`, `right`) with more beyond them, and gym.css fades
// that edge.
// Kept current as the box scrolls and the window resizes.

const WATCHED = 'pre.eqn, .pick, [role=tablist]';
const boxes = new Set();

/** Mark one box's cut edges. */
function mark(box) {
  const hidden = box.scrollWidth - box.clientWidth;
  const edges = [];
  if (hidden > 1 && box.scrollLeft > 1) edges.push('left');
  if (hidden > 1 && box.scrollLeft < hidden - 1) edges.push('right');
  if (edges.length) box.dataset.cut = edges.join(' ');
  else delete box.dataset.cut;
}

/** Mark, and keep marking, the cut edges of every listing box in `root`. */
export function markCuts(root) {
  for (const box of boxes) if (!box.isConnected) boxes.delete(box);
  for (const box of root.querySelectorAll(WATCHED)) {
    if (!boxes.has(box)) {
      boxes.add(box);
      box.addEventListener('scroll', () => mark(box), { passive: true });
    }
    mark(box);
  }
}

let resizing = 0;
window.addEventListener('resize', () => {
  cancelAnimationFrame(resizing);
  resizing = requestAnimationFrame(() => boxes.forEach(mark));
});
