package webhooks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// CacheOptions configure a Cache.
type CacheOptions struct {
	// Namespace holds the Webhooks and their Secrets (--namespace).
	Namespace string
	// Now is the clock that decides whether a previous secret still signs; time.Now when nil.
	Now func() time.Time
	Log *slog.Logger
}

// Cache answers which subscriptions receive an event from memory, for the delivery workers.
// Informers watch the namespace's Webhooks and only the signing Secrets (by label); their
// events keep an index by company and event type, with keys decoded once. It needs list and
// watch on webhooks and secrets in the namespace.
type Cache struct {
	informers ctrlcache.Cache
	now       func() time.Time
	log       *slog.Logger

	mu       sync.RWMutex
	webhooks map[string]*subscription // by object name
	keys     map[string]secretKeys    // by Secret name
	byTopic  map[topic]map[string]*subscription
}

type topic struct{ company, event string }

// subscription is what the index keeps of a deliverable Webhook.
type subscription struct {
	id, url, company string
	uid              types.UID
	events           []v1alpha1.EventType
	secretName       string
}

// secretKeys are a Secret's decoded keys; all holds current then previous, so a lookup
// returns a sub-slice and allocates nothing.
type secretKeys struct {
	owner types.UID
	all   []signing.HMACKey
}

// NewCache builds the cache; Run starts it.
func NewCache(cfg *rest.Config, o CacheOptions) (*Cache, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	informers, err := ctrlcache.New(cfg, ctrlcache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]ctrlcache.Config{o.Namespace: {}},
		ByObject:          map[client.Object]ctrlcache.ByObject{&corev1.Secret{}: {Label: v1alpha1.SigningSecretSelector()}},
		DefaultTransform:  ctrlcache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("webhook cache: %w", err)
	}
	c := newIndex(o)
	c.informers = informers
	ctx := context.Background()
	for _, h := range []struct {
		obj     client.Object
		handler toolscache.ResourceEventHandler
	}{
		{&v1alpha1.Webhook{}, handler(c.putWebhook, c.deleteWebhook)},
		{&corev1.Secret{}, handler(c.putSecret, c.deleteSecret)},
	} {
		inf, err := informers.GetInformer(ctx, h.obj)
		if err != nil {
			return nil, fmt.Errorf("webhook cache: informer: %w", err)
		}
		if _, err := inf.AddEventHandler(h.handler); err != nil {
			return nil, fmt.Errorf("webhook cache: event handler: %w", err)
		}
	}
	return c, nil
}

func newIndex(o CacheOptions) *Cache {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Cache{
		now: o.Now, log: o.Log,
		webhooks: map[string]*subscription{},
		keys:     map[string]secretKeys{},
		byTopic:  map[topic]map[string]*subscription{},
	}
}

// Name implements run.Component.
func (c *Cache) Name() string { return "webhook-cache" }

// Run watches until ctx ends.
func (c *Cache) Run(ctx context.Context) error { return c.informers.Start(ctx) }

// WaitForSync blocks until the first full listing is in the index. Deliver nothing before:
// an unsynced cache would say a company has no subscriptions.
func (c *Cache) WaitForSync(ctx context.Context) error {
	if !c.informers.WaitForCacheSync(ctx) {
		return errors.New("webhook cache: informers did not sync")
	}
	return nil
}

// Targets returns the subscriptions of the company to the event type that can be delivered
// now, sorted by id: not suspended, with a signing Secret. It makes no API call.
func (c *Cache) Targets(companyID, eventType string) []signing.Target {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	subs := c.byTopic[topic{companyID, eventType}]
	out := make([]signing.Target, 0, len(subs))
	for _, s := range subs {
		k, ok := c.keys[s.secretName]
		if !ok || k.owner != s.uid {
			continue // no secret yet (or a namesake's): nothing to sign with
		}
		out = append(out, signing.Target{ID: s.id, URL: s.url, Secrets: signing.Live(k.all, now)})
	}
	slices.SortFunc(out, func(a, b signing.Target) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func (c *Cache) putWebhook(obj any) {
	w, ok := obj.(*v1alpha1.Webhook)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unindex(w.Name)
	if w.Spec.Suspend || w.ID() == "" || !w.DeletionTimestamp.IsZero() {
		return // suspended, or not labelled by the controller yet
	}
	s := &subscription{id: w.ID(), url: w.Spec.URL, company: w.Spec.CompanyID, uid: w.UID,
		events: slices.Clone(w.Spec.Events), secretName: v1alpha1.SigningSecretName(w.Name)}
	c.webhooks[w.Name] = s
	for _, e := range s.events {
		t := topic{s.company, string(e)}
		if c.byTopic[t] == nil {
			c.byTopic[t] = map[string]*subscription{}
		}
		c.byTopic[t][w.Name] = s
	}
}

func (c *Cache) deleteWebhook(obj any) {
	if w, ok := obj.(*v1alpha1.Webhook); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.unindex(w.Name)
	}
}

// unindex drops a webhook from the index; the caller holds the lock.
func (c *Cache) unindex(name string) {
	s, ok := c.webhooks[name]
	if !ok {
		return
	}
	delete(c.webhooks, name)
	for _, e := range s.events {
		t := topic{s.company, string(e)}
		delete(c.byTopic[t], name)
		if len(c.byTopic[t]) == 0 {
			delete(c.byTopic, t)
		}
	}
}

func (c *Cache) putSecret(obj any) {
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	var owner types.UID
	if ref := metav1.GetControllerOf(sec); ref != nil {
		owner = ref.UID
	}
	keys, err := signing.FromData(sec.Data)
	if err != nil {
		// The controller replaces such a Secret; until then this webhook cannot be signed.
		c.log.Warn("webhook cache: unusable signing Secret", "secret", sec.Name, "err", err)
		c.deleteSecret(obj)
		return
	}
	all, _ := keys.HMACKeys() // FromData checked the current key
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys[sec.Name] = secretKeys{owner: owner, all: all}
}

func (c *Cache) deleteSecret(obj any) {
	if sec, ok := obj.(*corev1.Secret); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.keys, sec.Name)
	}
}

// handler adapts put and remove functions to informer events; a delete seen only through a
// relist arrives wrapped in a tombstone.
func handler(put, remove func(any)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { put(obj) },
		UpdateFunc: func(_, obj any) { put(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			remove(obj)
		},
	}
}
