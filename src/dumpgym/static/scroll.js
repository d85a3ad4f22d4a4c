// Scrolling a line into view inside its own scrolling box (a listing column, a drill's line picker),
// never the page: the page stays where the reader put it.

/** Where `box` should scroll to bring `child` into view (a third of the way down), or null if it is in view. */
export function scrollTarget(box, child) {
  // Measured against the box, not offsetTop: a line's offsetParent may be a block between them.
  const top = child.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
  const inView = top >= box.scrollTop && top + child.offsetHeight <= box.scrollTop + box.clientHeight;
  return inView ? null : { box, top: top - box.clientHeight / 3 };
}

/** Keep `child` in view inside the scrolling `box`, without scrolling the page. */
export function scrollIntoBox(box, child) {
  const move = scrollTarget(box, child);
  if (move) box.scrollTop = move.top;
}
