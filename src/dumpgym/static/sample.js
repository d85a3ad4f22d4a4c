// Weighted draws, shared by the drill view and the scheduler (so neither imports the other).
// An item's weight is the pool's: the page reads it and works nothing out itself.

/** An item's weight: how often the page asks it relative to the others (0 when it is not a number > 0). */
export function weightOf(item) {
  const w = item?.weight;
  return typeof w === 'number' && Number.isFinite(w) && w > 0 ? w : 0;
}

/**
 * Draw an index with probability proportional to its weight, never `skip` while any other index has
 * weight; -1 when nothing has weight. `random` returns a number in [0, 1), as Math.random does.
 */
export function pickWeighted(weights, skip = -1, random = Math.random) {
  const mass = (i) => (i === skip ? 0 : Math.max(0, weights[i]) || 0);
  let total = 0;
  for (let i = 0; i < weights.length; i++) total += mass(i);
  if (total <= 0) return skip >= 0 && weights[skip] > 0 ? skip : -1;
  let r = random() * total;
  let chosen = -1;
  for (let i = 0; i < weights.length; i++) {
    if (mass(i) <= 0) continue;
    chosen = i;
    if ((r -= mass(i)) < 0) break;
  }
  return chosen;  // the last with weight, should rounding leave `r` a hair above zero
}
