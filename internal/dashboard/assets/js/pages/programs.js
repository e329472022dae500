import { api, APIError } from '../api.js';
import { boot, fmt, t } from '../boot.js';
import { badge, busy, checkRequired, clearFieldErrors, clearFlash, fieldError, fillCurrencies, flash, h, localeAmount, showError, table } from '../ui.js';
import { loadMyInvitations, showAffiliateInvitations } from '../people.js';
import { trackingGuide } from '../onboarding.js';
import { listingCards } from '../listing.js';

const advertiser = boot.kind === 'advertiser';
const canWrite = boot.role !== 'member';
const form = document.getElementById('program-form');
const list = document.getElementById('programs');
const promoSection = document.getElementById('promotions-section');
const promoForm = document.getElementById('promotion-form');
let programs = [];
let partnerships = new Map();
let shownProgram = null;

export function ruleText(rule, currency) {
  if (!rule) return '–';
  const base = rule.type === 'percent' ? t('programs.rule_percent_of', { percent: fmt.number(rule.percent) }) : fmt.money(rule.amount, rule.currency || currency);
  return rule.recurring ? `${base} · ${recurringText(rule.recurring)}` : base;
}

function recurringText(r) {
  return r.lifetime ? t('programs.recurring_lifetime') : t('programs.recurring_for', { n: fmt.number(r.months) });
}

async function listAll(path, query = {}) {
  const out = [];
  let cursor = '';
  do {
    const page = await api.get(path, { ...query, limit: 100, cursor });
    out.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor && out.length < 1000);
  return out;
}

const searchForm = document.getElementById('search-form');

async function load() {
  try {
    const query = searchForm ? { q: searchForm.q.value.trim(), category: searchForm.category.value } : {};
    programs = await listAll('/api/programs', query);
    if (!advertiser) partnerships = new Map((await listAll('/api/partnerships')).map((p) => [p.program_id, p]));
  } catch (err) {
    showError(err);
    return;
  }
  if (!advertiser) {
    listingCards(list, programs, partnerships, { onApplied: load, onPromotions: showPromotions, ruleText,
      empty: searchForm.q.value.trim() || searchForm.category.value ? t('listing.no_match') : t('programs.empty_browse') });
    return;
  }
  const columns = [
    { label: t('programs.name'), render: (p) => (advertiser ? h('div', {}, p.name, h('br'), h('small', { class: 'mono muted' }, p.id)) : p.name) },
    { label: t('programs.rule'), class: 'num', render: (p) => ruleText(p.commission, p.currency) },
    { label: t('programs.window'), class: 'num', render: (p) => t('programs.days', { n: fmt.number(p.attribution_window_days) }) },
    { label: t('programs.visibility'), render: (p) => (p.visibility === 'public' ? t('programs.visibility_public')
      : [t('programs.visibility_approval'), h('br'), h('small', { class: 'muted' }, t(p.listed ? 'programs.directory.listed' : 'programs.directory.unlisted'))]) },
  ];
  if (advertiser) {
    columns.push({ label: t('common.status'), render: (p) => badge(p.status, 'm') });
    columns.push({ label: t('common.actions'), render: (p) => h('div', { class: 'row' },
      canWrite && h('button', { type: 'button', onclick: () => edit(p), 'aria-label': t('programs.edit_of', { name: p.name }) }, t('common.edit')),
      h('button', { type: 'button', onclick: () => showTracking(p), 'aria-label': t('onboarding.tracking_of', { name: p.name }) }, t('onboarding.tracking')),
      h('button', { type: 'button', onclick: () => showPromotions(p), 'aria-label': t('promotions.of', { name: p.name }) }, t('promotions.title')),
      p.status !== 'archived' && h('button', { type: 'button', onclick: () => showAffiliateInvitations(p), 'aria-label': t('affiliate_invitations.invite_of', { name: p.name }) }, t('affiliate_invitations.invite'))) });
  }
  table(list, columns, programs, { caption: t('programs.list_title'), empty: t('programs.empty') });
}

// showTracking shows how to track program p: a new program's next step.
function showTracking(p) {
  const section = document.getElementById('tracking-section');
  section.hidden = false;
  document.getElementById('tracking-of').textContent = p.name;
  const draw = () => document.getElementById('tracking').replaceChildren(trackingGuide(p, draw));
  draw();
  document.getElementById('tracking-title').focus();
}

function setMode(edit) {
  document.querySelectorAll('[data-form-mode]').forEach((el) => { el.hidden = el.dataset.formMode !== (edit ? 'edit' : 'create'); });
  // A program's currency cannot change: the list is shut while editing.
  if (form) form.currency.disabled = edit;
}

function edit(p) {
  clearFlash();
  form.id.value = p.id;
  form.name.value = p.name;
  form.landing_url.value = p.landing_url;
  form.currency.value = p.currency;
  form.rule.value = p.commission.type;
  form.value.value = p.commission.type === 'percent' ? p.commission.percent : p.commission.amount;
  const rec = p.commission.recurring;
  form.recurring.value = rec ? (rec.lifetime ? 'lifetime' : 'months') : '';
  form.recurring_months.value = rec && rec.months ? rec.months : 12;
  form.customer_window_days.value = p.customer_window_days ?? '';
  form.attribution_rule.value = p.attribution_rule;
  form.attribution_window_days.value = p.attribution_window_days;
  form.hold_days.value = p.hold_days ?? '';
  form.visibility.value = p.visibility;
  form.listed.checked = p.listed;
  form.status.value = p.status;
  form.description.value = p.description;
  form.website.value = p.website;
  form.terms.value = p.terms;
  form.querySelectorAll('input[name="categories"]').forEach((c) => { c.checked = p.categories.includes(c.value); });
  const texts = form.querySelectorAll('input[name="question"]');
  const required = form.querySelectorAll('input[name="question_required"]');
  texts.forEach((q, i) => { q.value = p.questions[i] ? p.questions[i].text : ''; required[i].checked = Boolean(p.questions[i] && p.questions[i].required); });
  showRecurringMonths();
  showListed();
  clearFieldErrors(form);
  setMode(true);
  form.name.focus();
}

// questionsOf reads the question rows that have a text.
function questionsOf(f) {
  const required = f.querySelectorAll('input[name="question_required"]');
  return [...f.querySelectorAll('input[name="question"]')]
    .map((q, i) => ({ text: q.value.trim(), required: required[i].checked }))
    .filter((q) => q.text);
}

function programBody() {
  const rule = form.rule.value;
  // Amounts and percents are typed as the page writes them ("12,50" in Spanish).
  const value = localeAmount(form.value.value);
  const commission = rule === 'percent' ? { type: rule, percent: value } : { type: rule, amount: value };
  if (form.recurring.value === 'lifetime') commission.recurring = { lifetime: true };
  if (form.recurring.value === 'months') commission.recurring = { months: Number(form.recurring_months.value) };
  const body = {
    name: form.name.value.trim(),
    landing_url: form.landing_url.value.trim(),
    currency: form.currency.value,
    commission,
    attribution_rule: form.attribution_rule.value,
    customer_window_days: form.customer_window_days.value === '' ? null : Number(form.customer_window_days.value),
    visibility: form.visibility.value,
    // A public program is always listed; an approval one as the brand ticks.
    listed: form.visibility.value === 'public' || form.listed.checked,
    status: form.status.value,
    hold_days: form.hold_days.value === '' ? null : Number(form.hold_days.value),
    description: form.description.value.trim(),
    website: form.website.value.trim(),
    terms: form.terms.value.trim(),
    categories: [...form.querySelectorAll('input[name="categories"]:checked')].map((c) => c.value),
    questions: questionsOf(form),
  };
  if (form.attribution_window_days.value) body.attribution_window_days = Number(form.attribution_window_days.value);
  return body;
}

// The months of recurring commission are asked only when renewals earn for some months.
function showRecurringMonths() {
  document.getElementById('p-recurring-months-field').hidden = form.recurring.value !== 'months';
}

// Only an approval program may stay out of the directory: public ones are always in it.
function showListed() {
  document.getElementById('p-listed-field').hidden = form.visibility.value !== 'approval';
}

// resetForm empties the form for a new program (listed, if approval, by default).
function resetForm() {
  form.reset();
  form.id.value = '';
  showRecurringMonths();
  showListed();
  clearFieldErrors(form);
  setMode(false);
}

if (form) {
  fillCurrencies(form.currency, 'EUR');
  form.recurring.addEventListener('change', showRecurringMonths);
  form.visibility.addEventListener('change', showListed);
  showRecurringMonths();
  showListed();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearFlash();
    if (!checkRequired(form)) return;
    let created = null;
    await busy(form, async () => {
      try {
        if (form.id.value) {
          await api.patch(`/api/programs/${encodeURIComponent(form.id.value)}`, programBody());
          flash(t('programs.saved'));
        } else {
          created = await api.post('/api/programs', programBody());
          flash(t('programs.created'));
        }
        resetForm();
        await load();
        if (created) showTracking(created);
      } catch (err) {
        showError(err, form);
      }
    });
  });
  document.getElementById('program-cancel').addEventListener('click', resetForm);
  setMode(false);
}

async function showPromotions(p) {
  if (shownProgram && shownProgram.id !== p.id) resetPromoForm();
  shownProgram = p;
  promoSection.hidden = false;
  document.getElementById('promotions-of').textContent = p.name;
  promoForm.hidden = !(advertiser && canWrite);
  try {
    const promos = await listAll(`/api/programs/${encodeURIComponent(p.id)}/promotions`);
    table(document.getElementById('promotions'), [
      { label: t('promotions.title_label'), render: (x) => x.title },
      { label: t('promotions.coupon'), class: 'mono', render: (x) => x.coupon_code || '–' },
      { label: t('promotions.starts'), render: (x) => fmt.date(x.starts_at) },
      { label: t('promotions.ends'), render: (x) => fmt.date(x.ends_at) },
      { label: t('common.status'), render: (x) => badge(x.active ? 'active' : 'paused') },
      advertiser && canWrite && { label: t('common.actions'), render: (x) => h('button', { type: 'button', onclick: () => editPromotion(x),
        'aria-label': t('promotions.edit_of', { title: x.title }) }, t('common.edit')) },
    ].filter(Boolean), promos, { caption: t('promotions.title'), empty: t('promotions.empty') });
  } catch (err) {
    showError(err);
  }
  document.getElementById('promotions-title').focus();
}

function dayStart(v) { return v ? `${v}T00:00:00Z` : null; }

// The promotion form adds a promotion, or changes the one it was filled with.
function setPromoMode(edit) {
  promoForm.querySelectorAll('[data-promo-mode]').forEach((el) => { el.hidden = el.dataset.promoMode !== (edit ? 'edit' : 'create'); });
}

function resetPromoForm() {
  promoForm.reset();
  clearFieldErrors(promoForm);
  promoForm.id.value = '';
  setPromoMode(false);
}

function editPromotion(x) {
  clearFlash();
  promoForm.id.value = x.id;
  promoForm.title.value = x.title;
  promoForm.coupon_code.value = x.coupon_code || '';
  promoForm.landing_url.value = x.landing_url || '';
  // The days are UTC days, as they are sent.
  promoForm.starts_at.value = x.starts_at ? x.starts_at.slice(0, 10) : '';
  promoForm.ends_at.value = x.ends_at ? x.ends_at.slice(0, 10) : '';
  setPromoMode(true);
  promoForm.title.focus();
}

promoForm.addEventListener('submit', async (e) => {
  e.preventDefault();
  clearFlash();
  if (!checkRequired(promoForm)) return;
  const body = { title: promoForm.title.value.trim(), coupon_code: promoForm.coupon_code.value.trim() || null,
    landing_url: promoForm.landing_url.value.trim() || null, starts_at: dayStart(promoForm.starts_at.value), ends_at: dayStart(promoForm.ends_at.value) };
  await busy(promoForm, async () => {
    try {
      if (promoForm.id.value) {
        // Empty fields are sent as null, which clears them.
        await api.patch(`/api/promotions/${encodeURIComponent(promoForm.id.value)}`, body);
        flash(t('promotions.saved'));
      } else {
        await api.post(`/api/programs/${encodeURIComponent(shownProgram.id)}/promotions`, body);
        flash(t('promotions.created'));
      }
      resetPromoForm();
      await showPromotions(shownProgram);
    } catch (err) {
      showError(err, promoForm);
    }
  });
});

document.getElementById('promotion-cancel').addEventListener('click', () => { resetPromoForm(); clearFlash(); promoForm.title.focus(); });

// An unlisted approval program is not in the listing: its id (the brand's join link) shows it, with
// its terms and questions, above the listing.
const applyForm = document.getElementById('apply-form');
async function showInvited(id) {
  clearFlash();
  try {
    const p = await api.get(`/api/programs/${encodeURIComponent(id)}`);
    programs = [p, ...programs.filter((x) => x.id !== p.id)];
    listingCards(list, programs, partnerships, { onApplied: load, onPromotions: showPromotions, ruleText });
    const heading = list.querySelector(`[data-id="${p.id}"] h3`);
    if (heading) heading.focus();
    return true;
  } catch (err) {
    // An id that shows no program (malformed, unknown, paused or of a program that is not
    // open to the affiliate) is said under the id, or alone for a member, who has no form.
    const unknown = err instanceof APIError && (err.status === 404 || err.status === 400);
    if (unknown && !applyForm.hidden) fieldError(applyForm, 'program_id', t('programs.lookup.not_found'));
    else if (unknown) flash(t('programs.lookup.not_found'), 'error');
    else showError(err, applyForm);
    return false;
  }
}
if (applyForm) {
  applyForm.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!checkRequired(applyForm)) return;
    showInvited(applyForm.program_id.value.trim()).then((shown) => { if (shown) applyForm.reset(); });
  });
}
if (searchForm) searchForm.addEventListener('submit', (e) => { e.preventDefault(); clearFlash(); load(); });

document.querySelectorAll('[data-writers-only]').forEach((el) => { if (!canWrite) el.hidden = true; });
const joinId = new URLSearchParams(location.search).get('program');
load().then(() => { if (!advertiser && joinId) showInvited(joinId); });
if (!advertiser) loadMyInvitations(load);
