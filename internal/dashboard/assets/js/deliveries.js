// The delivery log of webhooks and postbacks: one row per delivery, a replay button on the
// failed ones.
import { fmt, t } from './boot.js';
import { badge, h, table } from './ui.js';

// deliveryTable renders a delivery log (webhooks here, postbacks on their page).
export function deliveryTable(container, rows, canManage, onReplay) {
  table(container, [
    { label: t('common.created'), render: (d) => fmt.dateTime(d.created_at) },
    { label: t('deliveries.event'), class: 'mono', render: (d) => d.event_type },
    { label: t('common.status'), render: (d) => badge(d.status) },
    { label: t('deliveries.attempts'), class: 'num', render: (d) => fmt.number(d.attempt_count) },
    { label: t('deliveries.last_answer'), render: (d) => (d.last_status_code ? `HTTP ${d.last_status_code}` : d.last_error || '–') },
    { label: t('common.actions'), render: (d) => (canManage && d.status === 'failed'
      ? h('button', { type: 'button', onclick: () => onReplay(d), 'aria-label': t('deliveries.replay_of', { event: d.event_type, date: fmt.dateTime(d.created_at) }) },
        t('deliveries.replay')) : '') },
  ], rows, { caption: t('deliveries.title'), empty: t('deliveries.empty') });
}

// healthPanel shows a target's health (its circuit breaker, last success, success rate) and,
// to those who manage it, what to do when it was disabled: enable it again, then replay what
// failed meanwhile. actions: { disabled, enable, replay } (enable and replay are async).
export function healthPanel(container, e, canManage, actions) {
  container.replaceChildren();
  const state = actions.disabled ? 'disabled' : e.breaker;
  const facts = [h('span', { class: `badge health-${state}` }, t('health.' + state))];
  if (state === 'open' && e.open_until) facts.push(h('span', {}, t('health.next_try', { date: fmt.dateTime(e.open_until) })));
  facts.push(h('span', {}, e.last_success_at ? t('health.last_success', { date: fmt.dateTime(e.last_success_at) }) : t('health.no_success')));
  if (e.failing_since) facts.push(h('span', {}, t('health.failing_since', { date: fmt.dateTime(e.failing_since) })));
  facts.push(h('span', {}, e.success_rate_24h === null
    ? t('health.no_attempts')
    : t('health.rate', { rate: fmt.percent(e.success_rate_24h), n: fmt.number(e.attempts_24h) })));
  container.append(h('p', { class: 'health-facts' }, ...facts));
  if (!canManage) return;
  if (actions.disabled) {
    container.append(h('p', {}, t('health.disabled_help', { date: fmt.dateTime(e.disabled_at || e.failing_since) }), ' ',
      h('button', { type: 'button', onclick: actions.enable }, t('health.enable'))));
  } else if (e.failing_since && e.failed_since_failing > 0) {
    container.append(h('p', {}, h('button', { type: 'button', onclick: actions.replay },
      t('health.replay', { n: fmt.number(e.failed_since_failing), date: fmt.dateTime(e.failing_since) }))));
  }
}
