// Wiring: one progress store, one notice area, one register call per section.
import { registerNotices } from './notice.js';
import { Progress, registerProgressTools } from './streaks.js';
import { registerPath } from './path.js';
import { registerDrills } from './drill.js';
import { registerPending } from './pending.js';
import { registerDueCounts } from './schedule.js';
import { registerMastery } from './mastery.js';
import { registerCorpus } from './corpus.js';
import { registerReference } from './reference.js';
import { registerYours } from './yours.js';
import { rememberXray } from './data.js';
import { holdHashTarget } from './scroll.js';

const $ = (selector) => document.querySelector(selector);

// The x-ray's code and data come when its section nears the viewport: most visits start at the drills.
// Its "open in the x-ray" links work before then too: they set the picker, which the x-ray reads as it loads.
// The program the URL names (`?xray=SLUG`, written here when the learner picks one, by the picker or an "open in
// the x-ray" link, before the x-ray's code may have come) is the picker's from the start,
// so a reload or a shared link opens the same program; a slug the picker lacks is said once, in its place.
function wireXrayLater(root) {
  const pick = root.querySelector('[data-xray-pick]');
  const named = new URLSearchParams(location.search).get('xray');
  if (named !== null) {
    if ([...pick.options].some((o) => o.value === named)) pick.value = named;
    else {
      const note = document.createElement('p');
      note.className = 'fine';
      note.dataset.xrayMissing = '';
      note.textContent = `The link names a program this gym does not hold (${named}); showing ${pick.value}.`;
      root.querySelector('.xray-bar').after(note);
    }
  }
  document.addEventListener('click', (e) => {
    const open = e.target.closest('[data-xray-open]');
    if (!open) return;
    pick.value = open.dataset.xrayOpen;
    rememberXray(pick.value);
  }, { capture: true });
  pick.addEventListener('change', () => rememberXray(pick.value));
  const near = new IntersectionObserver((entries) => {
    if (!entries.some((en) => en.isIntersecting)) return;
    near.disconnect();
    import('./xray.js').then(({ registerXray }) => registerXray(root));
  }, { rootMargin: '200px 0px' });
  near.observe(root);
}
// The "one change" section's code comes the same way, when it nears the viewport.
function wireChangeLater(root) {
  if (!root) return;
  const near = new IntersectionObserver((entries) => {
    if (!entries.some((en) => en.isIntersecting)) return;
    near.disconnect();
    import('./change.js').then(({ registerChange }) => registerChange(root));
  }, { rootMargin: '200px 0px' });
  near.observe(root);
}
const notify = registerNotices($('[data-notices]'));
const progress = new Progress();
const tell = ({ message, ...how }) => notify(message, how);
progress.notices.forEach(tell);
progress.addEventListener('notice', (e) => tell(e.detail));

registerProgressTools($('[data-progress-tools]'), progress, notify);
registerPath($('#path'), $('[data-summary]'), progress, notify);
// The drills open on what the path's "next" points at.
const drills = registerDrills($('#drills'), progress, $('#path [data-next]')?.dataset.openDrill);
registerDueCounts($('#drills'), progress);
registerPending($('[data-drills-pending]'));
registerMastery($('#mastery'), progress, drills);
wireXrayLater($('#xray'));
wireChangeLater($('#change'));
registerCorpus($('#corpus'));
registerYours($('#path [data-yours-path]'), $('#corpus'));
registerReference($('#reference'));
holdHashTarget();
document.documentElement.dataset.ready = '';
performance.mark('dumpgym:ready');
