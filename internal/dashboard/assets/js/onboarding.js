// A brand's first steps (the overview) and a program's tracking instructions (the overview
// and the programs page), with the brand's own ids, and keys made on the spot, in copyable
// examples.
import { api } from './api.js';
import { boot, fmt, t } from './boot.js';
import { flash, h, showError } from './ui.js';

const canWrite = boot.role !== 'member';
let apiKey = '';

// snippet is a copyable block of code.
function snippet(id, label, text) {
  return h('div', { class: 'snippet' },
    h('div', { class: 'row' }, h('strong', { id: id + '-label' }, label),
      h('button', { type: 'button', class: 'copy', 'data-copy': '#' + id, 'aria-label': t('onboarding.copy_of', { name: label }) }, t('common.copy'))),
    h('pre', { 'aria-labelledby': id + '-label' }, h('code', { id }, text)));
}

function examples(p) {
  const origin = location.origin;
  const key = apiKey || '$PARTNERSTREAM_KEY';
  const amount = p.currency === 'JPY' ? '4250' : '42.50';
  return {
    link: `${origin}/c/<link-code>\n  → ${p.landing_url}${p.landing_url.includes('?') ? '&' : '?'}${p.click_param}=clk_…`,
    curl: `curl -s ${origin}/api/v1/conversions \\\n  -H "x-api-key: ${key}" -H 'content-type: application/json' \\\n` +
      `  -d '{"program_id": "${p.id}", "click_id": "<${p.click_param}>", "external_id": "order-1001", "amount": "${amount}", "currency": "${p.currency}"}'`,
    test: `curl -s ${origin}/api/v1/conversions/test \\\n  -H "x-api-key: ${key}" -H 'content-type: application/json' \\\n` +
      `  -d '{"program_id": "${p.id}", "external_id": "test-1", "amount": "${amount}"}'`,
    postback: `${origin}/postback?token=<postback-token>&click_id=<${p.click_param}>&external_id=order-1001&amount=${amount}&currency=${p.currency}&type=sale`,
  };
}

// trackingGuide is the instructions for tracking program p; onKey redraws it with a new key.
export function trackingGuide(p, onKey) {
  const ex = examples(p);
  const keyRow = apiKey
    ? h('p', { class: 'muted' }, t('onboarding.key_made'))
    : h('p', { class: 'row' }, t('onboarding.key_needed'), ' ',
      canWrite && h('button', { type: 'button', id: 'make-key', onclick: () => makeKey(onKey) }, t('onboarding.make_key')),
      h('a', { href: '/app/settings/api-keys' }, t('onboarding.keys_link')));
  return h('div', { class: 'tracking-guide', 'data-program': p.id },
    h('p', {}, t('onboarding.program_id'), ' ', h('code', { class: 'mono' }, p.id)),
    h('ol', { class: 'guide' },
      h('li', {}, h('p', {}, t('onboarding.step_link', { param: p.click_param })), snippet('ex-link-' + p.id, t('onboarding.link_format'), ex.link)),
      h('li', {}, h('p', {}, t('onboarding.step_api')), keyRow, snippet('ex-curl-' + p.id, t('onboarding.api_example'), ex.curl),
        snippet('ex-test-' + p.id, t('onboarding.test_example'), ex.test)),
      h('li', {}, h('p', {}, t('onboarding.step_postback', { id: p.id })), snippet('ex-postback-' + p.id, t('onboarding.postback_example'), ex.postback))));
}

async function makeKey(onKey) {
  try {
    const k = await api.post('/api/api-keys', { name: t('onboarding.key_name') });
    apiKey = k.key;
    flash(t('onboarding.key_created'));
    onKey();
    const curl = document.querySelector('.tracking-guide code[id^="ex-curl-"]');
    if (curl) curl.closest('.snippet').querySelector('button.copy').focus();
  } catch (err) {
    showError(err);
  }
}

function testResult(tc) {
  return h('p', { id: 'test-result', class: 'test-result', tabindex: '-1' },
    h('span', { class: 'badge test' }, t('onboarding.test_badge')), ' ',
    t('onboarding.test_received', { id: tc.id, amount: fmt.money(tc.amount, tc.currency), commission: fmt.money(tc.commission, tc.currency), when: fmt.dateTime(tc.created_at) }));
}

// renderOnboarding draws the brand's first steps into section, or hides it once they are
// done or dismissed.
export async function renderOnboarding(section) {
  let o;
  try {
    o = await api.get('/api/onboarding');
  } catch (err) {
    showError(err);
    return;
  }
  // state tells why the steps are shown or not (the browser tests wait for it).
  section.dataset.state = o.dismissed ? 'dismissed' : o.done ? 'done' : 'open';
  section.hidden = o.done || o.dismissed;
  if (section.hidden) return;
  const body = section.querySelector('.onboarding-body');
  const redraw = () => renderOnboarding(section);
  const step = (done, title, ...content) => h('li', { class: done ? 'done' : '' },
    h('h3', {}, h('span', { class: 'check', 'aria-hidden': 'true' }, done ? '✓' : '○'), ' ', title,
      done && h('span', { class: 'visually-hidden' }, ' ' + t('onboarding.done'))), ...content);
  const p = o.program;
  body.replaceChildren(h('ol', { class: 'steps' },
    step(o.steps.program, t('onboarding.step1'), !p && h('p', {}, h('a', { class: 'button primary', href: '/app/programs' }, t('onboarding.create_program')))),
    step(o.steps.tracking, t('onboarding.step2'), p ? trackingGuide(p, redraw) : h('p', { class: 'muted' }, t('onboarding.needs_program'))),
    step(o.steps.test_conversion, t('onboarding.step3'), p
      ? h('div', {}, h('p', {}, t('onboarding.test_help')),
        canWrite && h('button', { type: 'button', id: 'send-test', class: 'primary', onclick: () => sendTest(p, section) }, t('onboarding.send_test')),
        o.last_test && testResult(o.last_test))
      : h('p', { class: 'muted' }, t('onboarding.needs_program'))),
    step(o.steps.partner, t('onboarding.step4'), p
      ? h('div', {}, h('p', {}, t('onboarding.invite_help')),
        snippet('ex-join-' + p.id, t('onboarding.join_link'), `${location.origin}/app/programs?program=${p.id}`),
        h('p', {}, h('a', { href: '/app/partnerships' }, t('onboarding.partnerships_link'))))
      : h('p', { class: 'muted' }, t('onboarding.needs_program')))));
}

async function sendTest(p, section) {
  try {
    const amount = p.currency === 'JPY' ? '10000' : '100.00';
    await api.post('/api/onboarding/test-conversion', { program_id: p.id, external_id: `test-${Date.now()}`, amount });
    flash(t('onboarding.test_sent'));
    await renderOnboarding(section);
    const result = document.getElementById('test-result');
    if (result) result.focus();
  } catch (err) {
    showError(err);
  }
}

// wireDismiss makes the section's dismiss button hide the steps for the whole company.
export function wireDismiss(section) {
  const btn = section.querySelector('#dismiss-onboarding');
  if (!canWrite) { btn.hidden = true; return; }
  btn.addEventListener('click', async () => {
    try {
      await api.post('/api/onboarding/dismiss');
      section.hidden = true;
      flash(t('onboarding.dismissed'));
      document.getElementById('main').focus();
    } catch (err) {
      showError(err);
    }
  });
}
