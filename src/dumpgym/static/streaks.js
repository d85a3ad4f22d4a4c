// Progress, kept in localStorage under one versioned key and nowhere else:
// current and best streak per drill kind, and the path targets reached.
// A stored value this page cannot read is set aside under another key, never thrown away, never fatal.

export const KEY = 'dumpgym.progress/1';
const KIND = /^[a-z0-9-]{1,40}$/;
const TARGET = /^[0-9]{2}\/[a-z0-9-]{1,40}\/[0-9]{1,4}$/;
const FIELDS = new Set(['schema', 'streaks', 'reached', 'saved']);

/** A fresh progress record. */
export function emptyProgress() {
  return { schema: KEY, streaks: {}, reached: {} };
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isCount = (v) => Number.isSafeInteger(v) && v >= 0;

/** Why `value` is not a progress record, or '' when it is one. */
export function validate(value) {
  if (!isObject(value)) return 'it is not a JSON object';
  if (value.schema !== KEY) return `its schema is ${JSON.stringify(value.schema ?? null)}, not "${KEY}"`;
  for (const field of Object.keys(value)) if (!FIELDS.has(field)) return `it has an unknown field "${field}"`;
  if (!isObject(value.streaks) || !isObject(value.reached)) return 'streaks and reached must be objects';
  for (const [kind, s] of Object.entries(value.streaks)) {
    if (!KIND.test(kind)) return `"${kind}" is not a drill kind`;
    if (!isObject(s) || !isCount(s.current) || !isCount(s.best) || s.current > s.best || Object.keys(s).length !== 2) {
      return `the streak for ${kind} is not {current, best} with current ≤ best`;
    }
  }
  for (const [target, when] of Object.entries(value.reached)) {
    if (!TARGET.test(target) || typeof when !== 'string' || when.length > 40) return `"${target}" is not a path target`;
  }
  if ('saved' in value && (typeof value.saved !== 'string' || value.saved.length > 40)) return 'saved must be a date';
  return '';
}

function memoryStorage() {
  const map = new Map();
  return {
    getItem: (k) => (map.has(k) ? map.get(k) : null),
    setItem: (k, v) => map.set(k, String(v)),
    removeItem: (k) => map.delete(k),
  };
}

/** The progress store: load once, change through its methods, listen for 'change'. */
export class Progress extends EventTarget {
  constructor(storage) {
    super();
    this.notices = [];
    try {
      this.storage = storage ?? window.localStorage;
      this.storage.getItem(KEY);
    } catch {
      this.storage = memoryStorage();
      this.notices.push('This browser refuses local storage here, so progress will last only until you leave the page.');
    }
    this.data = this.#load();
  }

  #load() {
    let raw = null;
    try { raw = this.storage.getItem(KEY); } catch { return emptyProgress(); }
    if (raw === null) return emptyProgress();
    let value, problem;
    try { value = JSON.parse(raw); problem = validate(value); } catch { problem = 'it is not valid JSON'; }
    if (!problem) return value;
    const aside = `${KEY}:set-aside:${new Date().toISOString()}`;
    try { this.storage.setItem(aside, raw); } catch { /* full storage: the notice still explains */ }
    this.notices.push(`Saved progress could not be read (${problem}). It was kept under the key “${aside}” and a fresh record started.`);
    this.#save(emptyProgress());
    return emptyProgress();
  }

  #save(data) {
    try { this.storage.setItem(KEY, JSON.stringify(data)); } catch { /* quota or privacy mode: keep going in memory */ }
  }

  #changed(detail) {
    this.#save(this.data);
    this.dispatchEvent(new CustomEvent('change', { detail }));
  }

  /** {current, best} for a drill kind. */
  streak(kind) {
    return this.data.streaks[kind] ?? { current: 0, best: 0 };
  }

  /** Count one answer: a right one extends the streak, a wrong one ends it. */
  record(kind, right) {
    const s = { ...this.streak(kind) };
    s.current = right ? s.current + 1 : 0;
    s.best = Math.max(s.best, s.current);
    this.data.streaks[kind] = s;
    this.#changed({ kind, right });
  }

  /** Whether a path target has been reached. */
  reached(target) {
    return Object.hasOwn(this.data.reached, target);
  }

  /** Record a path target as reached (once). */
  markReached(target) {
    if (this.reached(target)) return;
    this.data.reached[target] = new Date().toISOString();
    this.#changed({ reached: target });
  }

  /** Forget every streak and target. */
  reset() {
    this.data = emptyProgress();
    this.#changed({ reset: true });
  }

  /** The record as the text of a JSON file. */
  exportText() {
    return JSON.stringify({ ...this.data, saved: new Date().toISOString() }, null, 1) + '\n';
  }

  /** Replace the record with an exported one; throws an Error saying what is wrong with it. */
  importText(text) {
    let value;
    try { value = JSON.parse(text); } catch { throw new Error('the file is not JSON'); }
    const problem = validate(value);
    if (problem) throw new Error(`the file is not dumpgym progress: ${problem}`);
    this.data = { schema: KEY, streaks: value.streaks, reached: value.reached };
    this.#changed({ imported: true });
  }
}

/** Wire the export, import and reset buttons. */
export function registerProgressTools(root, progress, notify) {
  const file = root.querySelector('[data-progress-file]');
  const reset = root.querySelector('[data-progress-reset]');
  root.querySelector('[data-progress-export]').addEventListener('click', () => {
    const blob = new Blob([progress.exportText()], { type: 'application/json' });
    const link = document.createElement('a');
    link.href = URL.createObjectURL(blob);
    link.download = `dumpgym-progress-${new Date().toISOString().slice(0, 10)}.json`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  });
  root.querySelector('[data-progress-import]').addEventListener('click', () => file.click());
  file.addEventListener('change', async () => {
    const chosen = file.files[0];
    file.value = '';
    if (!chosen) return;
    if (chosen.size > 1e6) { notify('That file is too large to be dumpgym progress.', { tone: 'bad' }); return; }
    try {
      progress.importText(await chosen.text());
      notify(`Progress imported from ${chosen.name}.`, { tone: 'good' });
    } catch (e) {
      notify(`Nothing imported: ${e.message}.`, { tone: 'bad', sticky: true });
    }
  });
  let armed = null;
  reset.addEventListener('click', () => {
    if (!armed) {
      reset.textContent = 'reset: sure?';
      reset.classList.add('armed');
      armed = setTimeout(() => { armed = null; reset.textContent = 'reset'; reset.classList.remove('armed'); }, 4000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    reset.textContent = 'reset';
    reset.classList.remove('armed');
    progress.reset();
    notify('Progress reset: every streak and target starts from zero.');
  });
}
