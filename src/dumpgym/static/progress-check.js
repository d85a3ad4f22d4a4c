// What the scheduler cannot take, caught before it can stop a drill. `streaks.js` checks a record's
// shape (`validate`); a record can pass that and still hold a card FSRS throws on (a due time before its
// last review gives `Invalid delta_t`, a day count of 1e300 an `Invalid time value`) or a `reached` time
// that is not a date. Here such records are repaired, or their cards set aside, with a notice: when the
// page loads a record (its own, another tab's) and when a file is imported. And every scheduling step is
// guarded: an error becomes a notice and a fresh card, and the drill moves on.
// The call sites, each marked "progress-check.js", are a few lines in streaks.js and drill.js.

const DAY_MS = 24 * 60 * 60 * 1000;
/** FSRS's own longest interval (ts-fsrs's default `maximum_interval`): no honest card holds more days. */
export const MAX_DAYS = 36500;
const EARLIEST = Date.parse('2000-01-01T00:00:00Z');
const CLOCK_SLACK_MS = DAY_MS;  // another device's clock may run a little ahead
const MAX_COUNT = 1e6;
export const SET_ASIDE_CARDS = 'dumpgym.progress/2:set-aside-cards';

/** Why the scheduler cannot take `card` (one that passed `validate`) at `now`, in a few words, or ''. */
export function cardTrouble(card, now = Date.now()) {
  const due = Date.parse(card.due);
  const last = Date.parse(card.last_review);
  if (due < EARLIEST || last < EARLIEST) return 'a date before 2000';
  if (last > now + CLOCK_SLACK_MS) return 'a last review in the future';
  if (due < last) return 'a due time before its last review';
  if (due > now + MAX_DAYS * DAY_MS) return `a due time more than ${MAX_DAYS} days ahead`;
  if ([card.stability, card.elapsed_days, card.scheduled_days].some((d) => d > MAX_DAYS)) {
    return `a stability or day count over ${MAX_DAYS} days`;
  }
  if (card.difficulty > 10) return 'a difficulty over 10';
  if (card.reps > MAX_COUNT || card.lapses > card.reps || card.learning_steps > 100) return 'counts no answers make';
  return '';
}

const isDate = (v) => typeof v === 'string' && v.length <= 40 && Number.isFinite(Date.parse(v));
const quote = (family) => `“${family.length > 60 ? `${family.slice(0, 60)}…` : family}”`;

/**
 * Repair `record` (a progress record that passed `validate`) in place: each card the scheduler cannot
 * take is taken out (that question starts afresh), kept under `SET_ASIDE_CARDS:<time>` in `storage`
 * when one is given; each `reached` time that is not a date becomes `now`. Returns a notice saying what
 * was done (`what` names the record: "Saved progress", "The file"), or '' when there was nothing to do.
 */
export function repairRecord(record, { storage = null, what = 'Saved progress', now = Date.now() } = {}) {
  const troubled = {};
  let example = '';
  for (const [family, card] of Object.entries(record.cards)) {
    const trouble = cardTrouble(card, now);
    if (!trouble) continue;
    troubled[family] = card;
    example ||= `${quote(family)}: ${trouble}`;
  }
  const undated = Object.keys(record.reached).filter((target) => !isDate(record.reached[target]));
  for (const target of undated) record.reached[target] = new Date(now).toISOString();
  const families = Object.keys(troubled);
  for (const family of families) delete record.cards[family];
  const said = [];
  if (families.length) {
    const n = families.length === 1 ? 'a card' : `${families.length} cards`;
    const kept = storage ? keepAside(storage, troubled, now) : '';
    const fate = kept ? `Kept under the key “${kept}”` : storage ? 'No room to keep them aside' : 'Left out';
    said.push(`${what} held ${n} the scheduler cannot take (${example}${families.length > 1 ? ', …' : ''}). ` +
      `${fate}; those questions start afresh.`);
  }
  if (undated.length) {
    const n = undated.length === 1 ? 'a path target' : `${undated.length} path targets`;
    said.push(`${what} held ${n} reached at a time that is not a date (${quote(undated[0])}): now dated today.`);
  }
  return said.join(' ');
}

function keepAside(storage, cards, now) {
  const key = `${SET_ASIDE_CARDS}:${new Date(now).toISOString()}`;
  try {
    const text = JSON.stringify(cards);
    storage.setItem(key, text);
    if (storage.getItem(key) === text) return key;
    storage.removeItem(key);
  } catch { /* full or refused */ }
  return '';
}

/**
 * The card after one answer, never an exception: `next(card, rating, now)` (schedule.js's `nextCard`),
 * checked; when it throws or gives a card the scheduler could not take next time, the question starts
 * afresh (`next(undefined, …)`), and `tell(message)` says so. Should even that fail, a card due in a minute.
 */
export function scheduleSafely(next, card, rating, family, tell, now = new Date()) {
  let trouble;
  try {
    const made = next(card, rating, now);
    trouble = cardTrouble(made, now.getTime());
    if (!trouble) return made;
  } catch (e) {
    trouble = e?.message || String(e);
  }
  tell(`The scheduler could not take the card of ${quote(family)} (${trouble}): that question starts afresh.`);
  try {
    const fresh = next(undefined, rating, now);
    if (!cardTrouble(fresh, now.getTime())) return fresh;
  } catch { /* the scheduler itself is broken: the card below keeps the record whole */ }
  const iso = now.toISOString();
  return { due: new Date(now.getTime() + 60 * 1000).toISOString(), stability: 0, difficulty: 0, elapsed_days: 0,
    scheduled_days: 0, learning_steps: 0, reps: 1, lapses: 0, state: 1, last_review: iso };
}

/** An error from rating an answer (ts-fsrs not loading, say), as a notice on `progress`; the drill goes on. */
export function schedulerTrouble(progress, error) {
  const message = `This answer could not be scheduled (${error?.message || error}); it is not in your progress. ` +
    'The drill goes on.';
  progress.dispatchEvent(new CustomEvent('notice', { detail: { message, tone: 'bad', sticky: false, key: 'scheduler' } }));
}
