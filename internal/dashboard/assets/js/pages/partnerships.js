import { api } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { badge, busy, checkRequired, clearFlash, flash, h, rowAction, showError, table } from '../ui.js';

const advertiser = boot.kind === 'advertiser';
const canDecide = advertiser && boot.role !== 'member';
const couponSection = document.getElementById('coupons-section');
const couponForm = document.getElementById('coupon-form');
let shown = null;
const form = document.getElementById('filter-form');
const container = document.getElementById('partnerships');
let names = new Map();

async function load() {
  try {
    if (!names.size) {
      const progs = await api.get('/api/programs', { limit: 100 });
      names = new Map(progs.data.map((p) => [p.id, p.name]));
    }
    const page = await api.get('/api/partnerships', { status: form.status.value, limit: 100 });
    const columns = [
      { label: t('partnerships.program'), render: (p) => names.get(p.program_id) || p.program_id },
      advertiser && { label: t('partnerships.affiliate'), render: (p) => p.affiliate_name || p.affiliate_id },
      !advertiser && { label: t('people.partner.brand'), render: (p) => p.advertiser_name || p.advertiser_id },
      { label: t('partnerships.message'), render: application },
      { label: t('common.created'), render: (p) => fmt.dateTime(p.created_at) },
      { label: t('common.status'), render: (p) => badge(p.status) },
      { label: t('common.actions'), render: (p) => h('div', { class: 'row' },
        h('button', { type: 'button', onclick: () => showCoupons(p), 'aria-label': t('coupons.of', { name: names.get(p.program_id) || p.program_id }) }, t('coupons.title')),
        advertiser && h('button', { type: 'button', onclick: () => showProfile(p), 'aria-label': t('people.partner.profile_of', { name: p.affiliate_name }) }, t('people.partner.profile')),
        canDecide && p.status === 'pending' && h('button', { type: 'button', onclick: () => act(p, 'approve') }, t('partnerships.approve')),
        canDecide && p.status === 'pending' && h('button', { type: 'button', class: 'danger', onclick: () => act(p, 'reject') }, t('partnerships.reject')),
        canDecide && p.status === 'approved' && h('button', { type: 'button', class: 'danger', onclick: () => act(p, 'suspend') }, t('partnerships.suspend'))) },
    ].filter(Boolean);
    table(container, columns, page.data, { caption: t('page.partnerships.title'), empty: t('partnerships.empty') });
  } catch (err) {
    showError(err);
  }
}

// application is what the affiliate wrote when applying: its message and its answers to
// the program's questions, each under the question as it was asked.
function application(p) {
  const answers = p.answers || [];
  if (!answers.length) return p.message || '–';
  return h('div', { class: 'application' }, p.message && h('p', {}, p.message),
    h('dl', { class: 'answers', 'aria-label': t('listing.answers') },
      answers.map((a) => h('div', {}, h('dt', {}, a.question), h('dd', {}, a.answer || '–')))));
}

async function act(p, action) {
  clearFlash();
  if (action !== 'approve' && !confirm(t('partnerships.confirm_' + action))) return;
  await rowAction(container, p.id, () => api.post(`/api/partnerships/${encodeURIComponent(p.id)}/${action}`),
    t('partnerships.done_' + action), load);
}

// showCoupons lists a partnership's coupon codes: the advertiser gives them, the affiliate
// hands them out.
async function showCoupons(p) {
  shown = p;
  couponSection.hidden = false;
  document.getElementById('coupons-of').textContent = `${names.get(p.program_id) || p.program_id}${advertiser ? ' · ' + (p.affiliate_name || p.affiliate_id) : ''}`;
  try {
    const page = await api.get(`/api/partnerships/${encodeURIComponent(p.id)}/coupon-codes`, { limit: 100 });
    table(document.getElementById('coupons'), [
      { label: t('coupons.code'), class: 'mono', render: (k) => k.code },
      { label: t('common.created'), render: (k) => fmt.dateTime(k.created_at) },
    ], page.data, { caption: t('coupons.title'), empty: t('coupons.empty') });
  } catch (err) {
    showError(err);
  }
  document.getElementById('coupons-title').focus();
}

// showProfile shows the partner profile of the partnership's affiliate, as it describes
// itself to the brands it applied to.
async function showProfile(p) {
  const section = document.getElementById('profile-section');
  try {
    const f = await api.get(`/api/affiliates/${encodeURIComponent(p.affiliate_id)}/profile`);
    const none = () => h('span', { class: 'muted' }, t('people.partner.not_given'));
    const website = /^https?:\/\//i.test(f.website) ? h('a', { href: f.website, rel: 'noopener noreferrer nofollow', target: '_blank' }, f.website) : none();
    const entry = (label, value) => [h('dt', {}, label), h('dd', {}, value)];
    document.getElementById('profile-of').textContent = f.display_name;
    document.getElementById('profile-view').replaceChildren(
      ...entry(t('people.profile.display_name'), f.display_name),
      ...entry(t('people.profile.website'), website),
      ...entry(t('people.profile.audience'), f.audience || none()),
      ...entry(t('people.profile.payout_email'), f.payout_email || none()));
    section.hidden = false;
    document.getElementById('profile-title').focus();
  } catch (err) {
    showError(err);
  }
}

if (couponForm) {
  if (boot.role === 'member') couponForm.hidden = true;
  couponForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFlash();
    const code = couponForm.code.value.trim();
    if (!checkRequired(couponForm)) return;
    await busy(couponForm, async () => {
      try {
        await api.post(`/api/partnerships/${encodeURIComponent(shown.id)}/coupon-codes`, { code });
        flash(t('coupons.added', { code }));
        couponForm.reset();
        await showCoupons(shown);
      } catch (err) {
        showError(err, couponForm);
      }
    });
  });
}

form.addEventListener('submit', (e) => { e.preventDefault(); clearFlash(); load(); });
load();
