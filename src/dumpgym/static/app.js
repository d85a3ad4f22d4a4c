// Wiring: one progress store, one notice area, one register call per section.
import { registerNotices } from './notice.js';
import { Progress, registerProgressTools } from './streaks.js';
import { registerPath } from './path.js';
import { registerDrills } from './drill.js';
import { registerDueCounts } from './schedule.js';
import { registerMastery } from './mastery.js';
import { registerXray } from './xray.js';
import { registerCorpus } from './corpus.js';
import { registerReference } from './reference.js';

const $ = (selector) => document.querySelector(selector);
const notify = registerNotices($('[data-notices]'));
const progress = new Progress();
const tell = ({ message, ...how }) => notify(message, how);
progress.notices.forEach(tell);
progress.addEventListener('notice', (e) => tell(e.detail));

registerProgressTools($('[data-progress-tools]'), progress, notify);
registerPath($('#path'), $('[data-summary]'), progress, notify);
const next = [...document.querySelectorAll('#path [data-target]')].find((t) => !t.hasAttribute('data-reached'));
const drills = registerDrills($('#drills'), progress, next?.dataset.drill);
registerDueCounts($('#drills'), progress);
registerMastery($('#mastery'), progress, drills);
registerXray($('#xray'));
registerCorpus($('#corpus'));
registerReference($('#reference'));
document.documentElement.dataset.ready = '';
performance.mark('dumpgym:ready');
