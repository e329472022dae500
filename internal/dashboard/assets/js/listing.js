// The affiliate's listing of programs: each brand's card with what it pays and asks, and
// "Join" (public programs, joined at once) or "Apply" (approval programs) with the brand's
// questions.
import { api } from './api.js';
import { boot, fmt, t } from './boot.js';
import { badge, clearFieldErrors, clearFlash, flash, h, markFields, showError } from './ui.js';

const canWrite = boot.role !== 'member';

function holdText(p) {
  return p.hold_days == null ? t('listing.hold_manual') : t('programs.days', { n: fmt.number(p.hold_days) });
}

function fact(label, value) {
  return h('div', {}, h('dt', {}, label), h('dd', {}, value));
}

// listingCards draws programs as cards into container; partnerships maps a program id to
// the affiliate's partnership with it.
export function listingCards(container, programs, partnerships, { onApplied, onPromotions, ruleText, empty }) {
  container.replaceChildren();
  if (!programs.length) {
    container.append(h('p', { class: 'empty' }, empty || t('programs.empty_browse')));
    return;
  }
  container.append(h('ul', { class: 'listing', 'aria-label': t('programs.list_title') },
    programs.map((p) => h('li', {}, card(p, partnerships.get(p.id), { onApplied, onPromotions, ruleText })))));
}

function card(p, ps, { onApplied, onPromotions, ruleText }) {
  const join = p.visibility === 'public';
  const form = ps || !canWrite ? null : applyForm(p, join, onApplied);
  const action = ps ? badge(ps.status)
    : canWrite && h('button', { type: 'button', class: 'primary apply',
      'aria-label': t(join ? 'listing.join_to' : 'programs.apply_to', { name: p.name }), 'aria-expanded': p.questions.length ? 'false' : null,
      onclick: (e) => (p.questions.length ? openForm(e.currentTarget, form) : submit(p, join, [], '', onApplied)) },
    t(join ? 'listing.join' : 'programs.apply'));
  return h('article', { class: 'card listing-card', dataset: { id: p.id } },
    h('h3', { tabindex: '-1' }, p.name),
    h('p', { class: 'muted brand-line' }, t('listing.by', { brand: p.advertiser_name }),
      p.website && [' · ', h('a', { href: p.website, rel: 'noopener noreferrer nofollow', target: '_blank' }, hostOf(p.website))]),
    p.categories.length > 0 && h('ul', { class: 'chips', 'aria-label': t('listing.categories') },
      p.categories.map((c) => h('li', {}, t('listing.cat_' + c)))),
    p.description && h('p', { class: 'about' }, p.description),
    h('dl', { class: 'facts' },
      fact(t('programs.rule'), (ruleText || defaultRule)(p.commission, p.currency)),
      fact(t('listing.hold'), holdText(p)),
      fact(t('programs.window'), t('programs.days', { n: fmt.number(p.attribution_window_days) })),
      fact(t('listing.joining'), t('listing.visibility_' + p.visibility))),
    p.terms && h('details', { class: 'terms' }, h('summary', {}, t('listing.terms')), h('p', {}, p.terms)),
    h('div', { class: 'row' }, action,
      h('button', { type: 'button', onclick: () => onPromotions(p), 'aria-label': t('promotions.of', { name: p.name }) }, t('promotions.title'))),
    form);
}

function defaultRule(rule, currency) {
  return rule.type === 'percent' ? t('programs.rule_percent_of', { percent: fmt.number(rule.percent) }) : fmt.money(rule.amount, currency);
}

function hostOf(url) {
  try { return new URL(url).host; } catch { return url; }
}

function openForm(button, form) {
  form.hidden = false;
  button.setAttribute('aria-expanded', 'true');
  const first = form.querySelector('textarea');
  if (first) first.focus();
}

// applyForm asks the program's questions (and an optional message) before applying.
function applyForm(p, join, onApplied) {
  const id = (i) => `answer-${p.id}-${i}`;
  const form = h('form', { class: 'apply-answers', novalidate: true, hidden: true, 'aria-label': t('listing.answers_of', { name: p.name }) },
    p.questions.map((q, i) => h('div', { class: 'field' },
      h('label', { for: id(i) }, q.text, q.required ? ` (${t('listing.required')})` : ''),
      // The API names an answer answers[i]: a refusal of it is marked here.
      h('textarea', { id: id(i), name: 'answer', rows: '2', maxlength: '2000', required: q.required, 'data-field': `answers[${i}]` }))),
    h('div', { class: 'field' }, h('label', { for: id('message') }, t('listing.message')),
      h('textarea', { id: id('message'), name: 'message', rows: '2', maxlength: '2000' })),
    h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary' }, t(join ? 'listing.join' : 'listing.send_application'))));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const answers = [...form.querySelectorAll('textarea[name="answer"]')];
    const missing = answers.filter((a, i) => p.questions[i].required && !a.value.trim());
    if (missing.length) {
      markFields(form, missing.map((a) => ({ field: a.dataset.field, text: t('listing.answer_required') })));
      flash(t('common.fill_required'), 'error');
      return;
    }
    clearFieldErrors(form);
    await submit(p, join, answers.map((a) => a.value.trim()), form.message.value.trim(), onApplied, form);
  });
  return form;
}

async function submit(p, join, answers, message, onApplied, form) {
  clearFlash();
  try {
    const ps = await api.post('/api/partnerships', { program_id: p.id, message, answers });
    flash(ps.status === 'approved' ? t('programs.applied_approved', { name: p.name }) : t('programs.applied_pending', { name: p.name }));
    await onApplied();
    // The keyboard goes to the program's card, now showing the partnership.
    const heading = document.querySelector(`.listing-card[data-id="${p.id}"] h3`);
    if (heading) heading.focus();
  } catch (err) {
    showError(err, form);
  }
}
