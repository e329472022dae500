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
