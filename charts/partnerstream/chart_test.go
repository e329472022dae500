package chart

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const testNamespace = "partnerstream"

// chartCase is a set of values and what must hold for the objects they render, beyond the
// rules every rendering obeys (checkInvariants).
type chartCase struct {
	name   string
	values string
	check  func(t *testing.T, r *release)
}

// allOptions turns every optional part of the chart on.
const allOptions = `
commonLabels: {team: growth}
api:
  ingress:
    enabled: true
    className: nginx
    hosts: [track.example.com]
    tls: [{secretName: track-tls, hosts: [track.example.com]}]
  autoscaling: {enabled: true, minReplicas: 3, maxReplicas: 12}
podDisruptionBudget: {enabled: true}
metrics:
  serviceMonitor: {enabled: true, labels: {release: kube-prometheus}}
  prometheusRule: {enabled: true}
grafanaDashboard: {enabled: true, folder: PartnerStream}
networkPolicy:
  enabled: true
  clusterCIDRs: [198.18.0.0/15]
  extraEgress:
    - to: [{ipBlock: {cidr: 10.20.0.0/16}}]
      ports: [{protocol: TCP, port: 5432}]
`

// externalSecrets takes every connection setting from Secrets.
const externalSecrets = `
postgres:
  url: {secretName: pg, secretKey: dsn}
clickhouse:
  addr: {value: ignored:9000, secretName: ch, secretKey: addr}
  password: {secretName: ch, secretKey: password}
kafka:
  brokers: {value: "", secretName: kafka, secretKey: bootstrap}
smtp:
  host: {value: smtp.example.com, secretName: "", secretKey: host}
  password: {secretName: smtp, secretKey: password}
oauth:
  google:
    clientID: {value: google-client, secretName: "", secretKey: client-id}
    clientSecret: {secretName: oidc, secretKey: google}
  linkedin:
    clientSecret: {secretName: oidc, secretKey: linkedin}
session:
  keys: {secretName: sessions, secretKey: keys}
clickIDs:
  keys: {secretName: clickids, secretKey: keys}
`

var chartCases = []chartCase{
	{
		name:   "the default values install the four components, their RBAC, the Webhook namespace, the CRD and the migrate Job",
		values: ``,
		check: func(t *testing.T, r *release) {
			wantKinds(t, r, map[string]int{
				"Deployment": 4, "ServiceAccount": 5, "Role": 3, "RoleBinding": 3, "ClusterRole": 1,
				"ClusterRoleBinding": 1, "Service": 2, "CustomResourceDefinition": 1, "Job": 1, "Namespace": 1,
			})
			wantWebhookNamespace(t, r, testNamespace+"-webhooks", true)
			crd := r.All("CustomResourceDefinition")[0]
			if crd.GetName() != "webhooks.partnerstream.io" || crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("CRD %s has annotations %v, want helm.sh/resource-policy: keep", crd.GetName(), crd.GetAnnotations())
			}
			if api := component(t, r, "api"); api.Kind != "Deployment" || api.Replicas == nil || *api.Replicas != 2 {
				t.Errorf("api is a %s with replicas %v, want a Deployment with 2", api.Kind, api.Replicas)
			}
			job := one[batchv1.Job](t, r, "Job", "-migrate")
			if got := job.Annotations["helm.sh/hook"]; got != "pre-install,pre-upgrade" {
				t.Errorf("migrate Job hook = %q", got)
			}
			if got := job.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, []string{"migrate"}) {
				t.Errorf("migrate Job args = %v", got)
			}
			// Click ids are always signed: without a key of the operator's, the chart makes one,
			// kept across upgrades and uninstalls, and the api reads it.
			secret := one[corev1.Secret](t, r, "Secret", "-click-ids")
			ring := strings.SplitN(string(secret.Data["keys"]), ":", 2)
			if key, err := base64.StdEncoding.DecodeString(ring[len(ring)-1]); len(ring) != 2 || ring[0] != "c1" || err != nil || len(key) != 32 ||
				secret.Annotations["helm.sh/resource-policy"] != "keep" {
				t.Errorf("click-id Secret holds %q (annotations %v), want c1:<32 random bytes> kept on uninstall", secret.Data["keys"], secret.Annotations)
			}
			apiEnv := containerEnv(component(t, r, "api").Template.Spec.Containers[0])
			wantSecretEnv(t, apiEnv, map[string][2]string{"PARTNERSTREAM_CLICK_ID_KEYS": {secret.Name, "keys"}})
			for _, name := range []string{"PARTNERSTREAM_TRUSTED_PROXIES", "PARTNERSTREAM_PROXY_PROTOCOL"} {
				if e, ok := apiEnv[name]; ok {
					t.Errorf("%s = %q by default; no proxy is trusted unless the operator names it", name, e.Value)
				}
			}
			// Topics are made for a production cluster: three copies, room for 12 replicas.
			if rf, parts := apiEnv["PARTNERSTREAM_KAFKA_REPLICATION_FACTOR"].Value, apiEnv["PARTNERSTREAM_KAFKA_PARTITIONS"].Value; rf != "3" || parts != "12" {
				t.Errorf("Kafka replication factor %q and partitions %q by default, want 3 and 12", rf, parts)
			}
			for _, name := range []string{"PARTNERSTREAM_KAFKA_TLS", "PARTNERSTREAM_KAFKA_SASL_MECHANISM", "PARTNERSTREAM_KAFKA_SASL_PASSWORD", "PARTNERSTREAM_KAFKA_TLS_CA_FILE"} {
				if e, ok := apiEnv[name]; ok {
					t.Errorf("%s = %+v by default, want it unset", name, e)
				}
			}
		},
	},
	{
		name:   "trusted proxies and the PROXY protocol reach the api",
		values: "api: {trustedProxies: [10.244.0.0/16, 192.0.2.7, \"2001:db8::/32\"], proxyProtocol: true}\n",
		check: func(t *testing.T, r *release) {
			env := containerEnv(component(t, r, "api").Template.Spec.Containers[0])
			if got := env["PARTNERSTREAM_TRUSTED_PROXIES"].Value; got != "10.244.0.0/16,192.0.2.7,2001:db8::/32" {
				t.Errorf("PARTNERSTREAM_TRUSTED_PROXIES = %q", got)
			}
			if got := env["PARTNERSTREAM_PROXY_PROTOCOL"].Value; got != "true" {
				t.Errorf("PARTNERSTREAM_PROXY_PROTOCOL = %q, want true", got)
			}
		},
	},
	{
		name:   "every option on adds the Ingress, HPA, PDBs, ServiceMonitor, rules, dashboard and NetworkPolicy",
		values: allOptions,
		check: func(t *testing.T, r *release) {
			wantKinds(t, r, map[string]int{
				"Ingress": 1, "HorizontalPodAutoscaler": 1, "PodDisruptionBudget": 4, "ServiceMonitor": 1,
				"PrometheusRule": 1, "ConfigMap": 1, "NetworkPolicy": 1,
			})
			api := component(t, r, "api")
			if api.Replicas != nil {
				t.Errorf("api has replicas %d while the HPA scales it", *api.Replicas)
			}
			hpa := one[autoscalingv2.HorizontalPodAutoscaler](t, r, "HorizontalPodAutoscaler", "-api")
			if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != api.Name || hpa.Spec.MaxReplicas != 12 {
				t.Errorf("HPA targets %+v (max %d), want Deployment %s (max 12)", hpa.Spec.ScaleTargetRef, hpa.Spec.MaxReplicas, api.Name)
			}
			ing := one[networkingv1.Ingress](t, r, "Ingress", "-api")
			svc := one[corev1.Service](t, r, "Service", "-api")
			backend := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service
			if ing.Spec.Rules[0].Host != "track.example.com" || backend.Name != svc.Name || backend.Port.Name != svc.Spec.Ports[0].Name {
				t.Errorf("Ingress routes %s to %+v, want the api Service %s", ing.Spec.Rules[0].Host, backend, svc.Name)
			}
			for _, pdb := range typed[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget") {
				if n := len(podsSelected(t, r, pdb.Spec.Selector.MatchLabels)); n != 1 {
					t.Errorf("PDB %s selects the pods of %d workloads, want 1", pdb.Name, n)
				}
				// A crash-looping pod must not block node drains.
				if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
					t.Errorf("PDB %s: unhealthyPodEvictionPolicy %v, want AlwaysAllow", pdb.Name, p)
				}
			}
			sm := r.All("ServiceMonitor")[0]
			smSelector, _, _ := unstructuredMap(sm.Object, "spec", "selector", "matchLabels")
			metricsSvc := one[corev1.Service](t, r, "Service", "-metrics")
			if !labels.SelectorFromSet(smSelector).Matches(labels.Set(metricsSvc.Labels)) || sm.GetLabels()["release"] != "kube-prometheus" {
				t.Errorf("ServiceMonitor selects %v and is labelled %v; the metrics Service has %v", smSelector, sm.GetLabels(), metricsSvc.Labels)
			}
			cm := r.All("ConfigMap")[0]
			if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetAnnotations()["grafana_folder"] != "PartnerStream" {
				t.Errorf("dashboard ConfigMap labels %v annotations %v", cm.GetLabels(), cm.GetAnnotations())
			}
			data, _, _ := unstructuredMap(cm.Object, "data")
			var dash map[string]any
			if err := json.Unmarshal([]byte(data["partnerstream.json"]), &dash); err != nil || dash["uid"] != "partnerstream" {
				t.Errorf("dashboard is not the Grafana JSON: %v", err)
			}
			checkDeliverNetworkPolicy(t, r)
		},
	},
	{
		name:   "crds.install false leaves the CRD to the cluster admin",
		values: `crds: {install: false}`,
		check: func(t *testing.T, r *release) {
			wantKinds(t, r, map[string]int{"CustomResourceDefinition": 0, "Deployment": 4})
		},
	},
	{
		name:   "connection settings come from existing Secrets, which win over plain values",
		values: externalSecrets,
		check: func(t *testing.T, r *release) {
			api := containerEnv(component(t, r, "api").Template.Spec.Containers[0])
			wantSecretEnv(t, api, map[string][2]string{
				"PARTNERSTREAM_POSTGRES_URL":                 {"pg", "dsn"},
				"PARTNERSTREAM_CLICKHOUSE_ADDR":              {"ch", "addr"},
				"PARTNERSTREAM_CLICKHOUSE_PASSWORD":          {"ch", "password"},
				"PARTNERSTREAM_KAFKA_BROKERS":                {"kafka", "bootstrap"},
				"PARTNERSTREAM_SMTP_PASSWORD":                {"smtp", "password"},
				"PARTNERSTREAM_OAUTH_GOOGLE_CLIENT_SECRET":   {"oidc", "google"},
				"PARTNERSTREAM_OAUTH_LINKEDIN_CLIENT_SECRET": {"oidc", "linkedin"},
				"PARTNERSTREAM_SESSION_KEYS":                 {"sessions", "keys"},
				"PARTNERSTREAM_CLICK_ID_KEYS":                {"clickids", "keys"},
			})
			if e := api["PARTNERSTREAM_SMTP_HOST"]; e.Value != "smtp.example.com" || e.ValueFrom != nil {
				t.Errorf("PARTNERSTREAM_SMTP_HOST = %+v, want the plain value", e)
			}
			if e := api["PARTNERSTREAM_OAUTH_GOOGLE_CLIENT_ID"]; e.Value != "google-client" {
				t.Errorf("PARTNERSTREAM_OAUTH_GOOGLE_CLIENT_ID = %+v", e)
			}
			if _, ok := api["PARTNERSTREAM_OAUTH_LINKEDIN_CLIENT_ID"]; ok {
				t.Error("an empty setting is passed to the api; it must be left out so the default applies")
			}
			migrate := containerEnv(one[batchv1.Job](t, r, "Job", "-migrate").Spec.Template.Spec.Containers[0])
			wantSecretEnv(t, migrate, map[string][2]string{"PARTNERSTREAM_POSTGRES_URL": {"pg", "dsn"}, "PARTNERSTREAM_CLICKHOUSE_ADDR": {"ch", "addr"}})
			ingest := containerEnv(component(t, r, "ingest").Template.Spec.Containers[0])
			if _, ok := ingest["PARTNERSTREAM_POSTGRES_URL"]; ok {
				t.Error("ingest gets the Postgres URL, which it does not use")
			}
		},
	},
	{
		name: "the operator's geo databases and hosting ASNs reach ingest, and only ingest",
		values: "ingest:\n  geoip: {volume: {persistentVolumeClaim: {claimName: geoip}}, file: City.mmdb, asnFile: ASN.mmdb}\n" +
			"  hostingASNs: [64500, 4200000000]\n  keepFullIP: true\n",
		check: func(t *testing.T, r *release) {
			ing := component(t, r, "ingest").Template.Spec
			env := containerEnv(ing.Containers[0])
			for name, want := range map[string]string{
				"PARTNERSTREAM_GEOIP_DB":     "/etc/partnerstream/geoip/City.mmdb",
				"PARTNERSTREAM_ASN_DB":       "/etc/partnerstream/geoip/ASN.mmdb",
				"PARTNERSTREAM_HOSTING_ASNS": "/etc/partnerstream/hosting-asns/hosting-asns.txt",
				"PARTNERSTREAM_KEEP_FULL_IP": "true",
			} {
				if env[name].Value != want {
					t.Errorf("ingest %s = %q, want %q", name, env[name].Value, want)
				}
			}
			volumes := map[string]corev1.Volume{}
			for _, v := range ing.Volumes {
				volumes[v.Name] = v
			}
			if v := volumes["geoip"]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "geoip" {
				t.Errorf("ingest's geoip volume is %+v", v)
			}
			cmName := ""
			if v := volumes["hosting-asns"]; v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
			}
			var found bool
			for _, cm := range r.All("ConfigMap") {
				if cm.GetName() == cmName {
					data, _, _ := unstructuredMap(cm.Object, "data")
					found = strings.Contains(data["hosting-asns.txt"], "\n64500\n4200000000\n")
					if !found {
						t.Errorf("hosting-asns.txt is %q", data["hosting-asns.txt"])
					}
				}
			}
			if !found {
				t.Errorf("no ConfigMap %q of hosting ASNs", cmName)
			}
			api := component(t, r, "api").Template.Spec
			for _, v := range api.Volumes {
				if v.Name == "geoip" || v.Name == "hosting-asns" {
					t.Errorf("the api gets ingest's volume %s", v.Name)
				}
			}
			if _, ok := containerEnv(api.Containers[0])["PARTNERSTREAM_GEOIP_DB"]; ok {
				t.Error("the api gets --geoip-db")
			}
		},
	},
	{
		name:   "a persistent click spool makes the api a StatefulSet with a volume per pod",
		values: "api:\n  clickSpool: {persistence: {enabled: true, storageClassName: fast, size: 5Gi}}\n  autoscaling: {enabled: true}\n",
		check: func(t *testing.T, r *release) {
			wantKinds(t, r, map[string]int{"Deployment": 3, "StatefulSet": 1, "HorizontalPodAutoscaler": 1})
			sts := one[appsv1.StatefulSet](t, r, "StatefulSet", "-api")
			claim := sts.Spec.VolumeClaimTemplates
			if len(claim) != 1 || claim[0].Name != "spool" || *claim[0].Spec.StorageClassName != "fast" || claim[0].Spec.Resources.Requests.Storage().String() != "5Gi" {
				t.Errorf("volume claim templates %+v, want one 5Gi spool of class fast", claim)
			}
			if slices.ContainsFunc(sts.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "spool" }) {
				t.Error("the spool is still an emptyDir")
			}
			if sts.Spec.ServiceName != one[corev1.Service](t, r, "Service", "-metrics").Name {
				t.Errorf("StatefulSet serviceName %q is not the headless metrics Service", sts.Spec.ServiceName)
			}
			if ref := one[autoscalingv2.HorizontalPodAutoscaler](t, r, "HorizontalPodAutoscaler", "-api").Spec.ScaleTargetRef; ref.Kind != "StatefulSet" || ref.Name != sts.Name {
				t.Errorf("HPA scales %+v, want the api StatefulSet", ref)
			}
		},
	},
	{
		name:   "an egress CA bundle is mounted into the api and deliver and named to them",
		values: "egress: {caBundle: {configMapName: receivers-ca, key: bundle.pem}}\napi: {service: {type: NodePort, nodePort: 30080}}\n",
		check: func(t *testing.T, r *release) {
			for _, name := range []string{"api", "deliver", "ingest", "controller"} {
				pod := component(t, r, name).Template.Spec
				env := containerEnv(pod.Containers[0])
				mounted := slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == "egress-ca" && m.MountPath == "/etc/partnerstream/egress-ca" && m.ReadOnly
				})
				sends := name == "api" || name == "deliver"
				if got := env["PARTNERSTREAM_EGRESS_CA_FILE"].Value; sends != (got == "/etc/partnerstream/egress-ca/bundle.pem") || sends != mounted {
					t.Errorf("%s: PARTNERSTREAM_EGRESS_CA_FILE %q, mounted %v; want both only where receivers are called", name, got, mounted)
				}
				if sends && !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
					return v.Name == "egress-ca" && v.ConfigMap != nil && v.ConfigMap.Name == "receivers-ca"
				}) {
					t.Errorf("%s: no egress-ca volume from the ConfigMap receivers-ca", name)
				}
			}
			svc := one[corev1.Service](t, r, "Service", "-api")
			if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30080 {
				t.Errorf("api Service %s with node port %d, want NodePort 30080", svc.Spec.Type, svc.Spec.Ports[0].NodePort)
			}
			// Unique clicks are decided by ingest: nothing needs a client pinned to a replica,
			// and pinning would pin a whole proxy.
			if svc.Spec.SessionAffinity != corev1.ServiceAffinityNone || svc.Spec.SessionAffinityConfig != nil {
				t.Errorf("api Service affinity %s %+v, want None", svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig)
			}
		},
	},
	{
		name: "a managed Kafka: TLS with a CA and client certificate from a Secret mounted as files, SCRAM with the password from a Secret",
		values: `
kafka:
  replicationFactor: 3
  compression: zstd
  tls: {enabled: true, secretName: kafka-tls, caKey: ca.pem, certKey: tls.crt, keyKey: tls.key, serverName: broker.example.com}
  sasl:
    mechanism: SCRAM-SHA-512
    username: {value: partnerstream}
    password: {secretName: kafka-sasl, secretKey: pw}
`,
		check: func(t *testing.T, r *release) {
			for _, name := range []string{"api", "ingest", "deliver", "controller"} {
				pod := component(t, r, name).Template.Spec
				env := containerEnv(pod.Containers[0])
				talks := name != "controller"
				mounted := slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == "kafka-tls" && m.MountPath == "/etc/partnerstream/kafka-tls" && m.ReadOnly
				})
				volume := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
					return v.Name == "kafka-tls" && v.Secret != nil && v.Secret.SecretName == "kafka-tls"
				})
				if mounted != talks || volume != talks {
					t.Errorf("%s: kafka-tls mounted %v, volume %v; want both only where Kafka is used", name, mounted, volume)
				}
				if !talks {
					if _, ok := env["PARTNERSTREAM_KAFKA_SASL_PASSWORD"]; ok {
						t.Errorf("%s gets the Kafka password", name)
					}
					continue
				}
				want := map[string]string{
					"PARTNERSTREAM_KAFKA_TLS": "true", "PARTNERSTREAM_KAFKA_TLS_SERVER_NAME": "broker.example.com",
					"PARTNERSTREAM_KAFKA_TLS_CA_FILE":    "/etc/partnerstream/kafka-tls/ca.pem",
					"PARTNERSTREAM_KAFKA_TLS_CERT_FILE":  "/etc/partnerstream/kafka-tls/tls.crt",
					"PARTNERSTREAM_KAFKA_TLS_KEY_FILE":   "/etc/partnerstream/kafka-tls/tls.key",
					"PARTNERSTREAM_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "PARTNERSTREAM_KAFKA_SASL_USERNAME": "partnerstream",
					"PARTNERSTREAM_KAFKA_COMPRESSION": "zstd", "PARTNERSTREAM_KAFKA_REPLICATION_FACTOR": "3",
				}
				for k, v := range want {
					if env[k].Value != v {
						t.Errorf("%s: %s = %q, want %q", name, k, env[k].Value, v)
					}
				}
				wantSecretEnv(t, env, map[string][2]string{"PARTNERSTREAM_KAFKA_SASL_PASSWORD": {"kafka-sasl", "pw"}})
			}
		},
	},
	{
		name:   "a stopping api pod keeps answering while it leaves the Service, within its grace period",
		values: "api: {preStopSleepSeconds: 7}\nshutdownTimeoutSeconds: 20\n",
		check: func(t *testing.T, r *release) {
			api := component(t, r, "api").Template.Spec
			if l := api.Containers[0].Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != 7 {
				t.Errorf("api preStop %+v, want a 7 s sleep", l)
			}
			if g := *api.TerminationGracePeriodSeconds; g != 20+5+7 {
				t.Errorf("api grace period %d s, want the drain, 5 s and the preStop sleep (32)", g)
			}
			if l := component(t, r, "deliver").Template.Spec.Containers[0].Lifecycle; l != nil {
				t.Errorf("deliver has a preStop hook %+v; only the api is behind a Service", l)
			}
		},
	},
	{
		name:   "webhookNamespace puts the Webhook Roles there and tells the components",
		values: `webhookNamespace: hooks`,
		check: func(t *testing.T, r *release) {
			wantKinds(t, r, map[string]int{"Namespace": 1})
			wantWebhookNamespace(t, r, "hooks", true)
		},
	},
	{
		name:   "createWebhookNamespace false leaves the Webhook namespace to the cluster admin",
		values: `createWebhookNamespace: false`,
		check: func(t *testing.T, r *release) {
			wantKinds(t, r, map[string]int{"Namespace": 0})
			wantWebhookNamespace(t, r, testNamespace+"-webhooks", false)
		},
	},
	{
		name:   "webhookNamespace may be the release namespace, which the chart never creates",
		values: "webhookNamespace: " + testNamespace,
		check: func(t *testing.T, r *release) {
			wantKinds(t, r, map[string]int{"Namespace": 0})
			wantWebhookNamespace(t, r, testNamespace, false)
		},
	},
}

// wantWebhookNamespace: the Roles (so every right on Secrets), the controller's one
// namespace and the components' --namespace are ns, and the chart creates ns (kept on
// uninstall, restricted) when created says so.
func wantWebhookNamespace(t *testing.T, r *release, ns string, created bool) {
	t.Helper()
	for _, role := range typed[rbacv1.Role](t, r, "Role") {
		if role.Namespace != ns {
			t.Errorf("Role %s is in %s, want %s", role.Name, role.Namespace, ns)
		}
	}
	cr := typed[rbacv1.ClusterRole](t, r, "ClusterRole")[0]
	if !slices.Equal(cr.Rules[0].ResourceNames, []string{ns}) {
		t.Errorf("the controller may get namespaces %v, want only %s", cr.Rules[0].ResourceNames, ns)
	}
	for _, comp := range []string{"api", "deliver", "controller"} {
		env := containerEnv(component(t, r, comp).Template.Spec.Containers[0])
		if got := env["PARTNERSTREAM_NAMESPACE"].Value; got != ns {
			t.Errorf("%s PARTNERSTREAM_NAMESPACE = %q, want %s", comp, got, ns)
		}
	}
	namespaces := typed[corev1.Namespace](t, r, "Namespace")
	if !created {
		return
	}
	if len(namespaces) != 1 || namespaces[0].Name != ns || namespaces[0].Annotations["helm.sh/resource-policy"] != "keep" ||
		namespaces[0].Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespaces %+v, want %s, kept on uninstall and restricted", namespaces, ns)
	}
}

func TestChartRendersValidObjects(t *testing.T) {
	settings := readmeSettings(t)
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, testNamespace, tc.values)
			checkInvariants(t, r, settings)
			tc.check(t, r)
		})
	}
}

func wantKinds(t *testing.T, r *release, want map[string]int) {
	t.Helper()
	for kind, n := range want {
		if got := len(r.All(kind)); got != n {
			t.Errorf("%d %s objects, want %d", got, kind, n)
		}
	}
	for _, optional := range []string{"StatefulSet", "Ingress", "HorizontalPodAutoscaler", "PodDisruptionBudget", "ServiceMonitor", "PrometheusRule", "ConfigMap", "NetworkPolicy"} {
		if _, listed := want[optional]; !listed && len(r.All(optional)) > 0 {
			t.Errorf("%s rendered although it was not asked for", optional)
		}
	}
}

// components are the long-running workloads; migrate is the hook Job.
var components = []string{"api", "ingest", "deliver", "controller"}

// checkInvariants holds for every rendering: labels, selectors, probes, security, env, RBAC.
func checkInvariants(t *testing.T, r *release, settings map[string][]string) {
	t.Helper()
	for _, o := range r.Objects {
		l := o.GetLabels()
		for _, k := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "helm.sh/chart"} {
			if l[k] == "" {
				t.Errorf("%s %s has no label %s", o.GetKind(), o.GetName(), k)
			}
		}
		if o.GetKind() != "CustomResourceDefinition" && l["app.kubernetes.io/component"] == "" {
			t.Errorf("%s %s has no component label", o.GetKind(), o.GetName())
		}
		if !clusterScoped[o.GetKind()] && o.GetNamespace() == "" {
			t.Errorf("%s %s has no namespace", o.GetKind(), o.GetName())
		}
	}
	serviceAccounts := map[string]bool{}
	for _, sa := range typed[corev1.ServiceAccount](t, r, "ServiceAccount") {
		serviceAccounts[sa.Name] = true
		if comp := sa.Labels["app.kubernetes.io/component"]; (comp == "ingest" || comp == "migrate") != (sa.AutomountServiceAccountToken != nil && !*sa.AutomountServiceAccountToken) {
			t.Errorf("ServiceAccount %s mounts a token: %v (only components that call the Kubernetes API may)", sa.Name, sa.AutomountServiceAccountToken)
		}
	}
	ws := workloads(t, r)
	if len(ws) != len(components) {
		t.Fatalf("%d Deployments and StatefulSets, want %d", len(ws), len(components))
	}
	for _, d := range ws {
		comp := d.Labels["app.kubernetes.io/component"]
		if !labels.SelectorFromSet(d.Selector.MatchLabels).Matches(labels.Set(d.Template.Labels)) || d.Selector.MatchLabels["app.kubernetes.io/component"] != comp {
			t.Errorf("%s %s selects %v, its pods are labelled %v", d.Kind, d.Name, d.Selector.MatchLabels, d.Template.Labels)
		}
		if n := len(podsSelected(t, r, d.Selector.MatchLabels)); n != 1 {
			t.Errorf("%s %s's selector also matches other components' pods (%d workloads)", d.Kind, d.Name, n)
		}
		pod := d.Template.Spec
		checkPod(t, d.Name, pod, serviceAccounts)
		if len(pod.TopologySpreadConstraints) == 0 {
			t.Errorf("%s has no topology spread constraints", d.Name)
		}
		for _, c := range pod.TopologySpreadConstraints {
			if !reflect.DeepEqual(c.LabelSelector.MatchLabels, d.Selector.MatchLabels) {
				t.Errorf("%s spreads pods selected by %v, not its own", d.Name, c.LabelSelector.MatchLabels)
			}
		}
		c := pod.Containers[0]
		if !slices.Equal(c.Args, []string{comp}) {
			t.Errorf("%s runs args %v, want [%s]", d.Name, c.Args, comp)
		}
		checkProbes(t, d.Name, c)
		checkEnv(t, comp, c, settings)
		for _, m := range c.VolumeMounts {
			if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name }) && !slices.Contains(d.ClaimNames, m.Name) {
				t.Errorf("%s mounts volume %s, which it does not define", d.Name, m.Name)
			}
		}
	}
	for _, j := range typed[batchv1.Job](t, r, "Job") {
		checkPod(t, j.Name, j.Spec.Template.Spec, serviceAccounts)
		checkEnv(t, "migrate", j.Spec.Template.Spec.Containers[0], settings)
	}
	for _, s := range typed[corev1.Service](t, r, "Service") {
		pods := podsSelected(t, r, s.Spec.Selector)
		if len(pods) == 0 {
			t.Errorf("Service %s selects no pods (%v)", s.Name, s.Spec.Selector)
		}
		for _, p := range s.Spec.Ports {
			for _, pod := range pods {
				if !hasPort(pod, p.TargetPort) {
					t.Errorf("Service %s targets port %s, which pods of %s lack", s.Name, p.TargetPort.String(), pod.Containers[0].Name)
				}
			}
		}
	}
	checkRBAC(t, r, serviceAccounts)
}

var clusterScoped = map[string]bool{"CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true, "Namespace": true}

// workload is a Deployment or a StatefulSet, as far as the checks care.
type workload struct {
	Kind, Name string
	Labels     map[string]string
	Selector   *metav1.LabelSelector
	Replicas   *int32
	Template   corev1.PodTemplateSpec
	ClaimNames []string // volumeClaimTemplates of a StatefulSet
}

func workloads(t *testing.T, r *release) []workload {
	t.Helper()
	var out []workload
	for _, d := range typed[appsv1.Deployment](t, r, "Deployment") {
		out = append(out, workload{Kind: "Deployment", Name: d.Name, Labels: d.Labels, Selector: d.Spec.Selector, Replicas: d.Spec.Replicas, Template: d.Spec.Template})
	}
	for _, s := range typed[appsv1.StatefulSet](t, r, "StatefulSet") {
		w := workload{Kind: "StatefulSet", Name: s.Name, Labels: s.Labels, Selector: s.Spec.Selector, Replicas: s.Spec.Replicas, Template: s.Spec.Template}
		for _, c := range s.Spec.VolumeClaimTemplates {
			w.ClaimNames = append(w.ClaimNames, c.Name)
		}
		out = append(out, w)
	}
	return out
}

// component is the workload of one component.
func component(t *testing.T, r *release, name string) workload {
	t.Helper()
	for _, w := range workloads(t, r) {
		if w.Labels["app.kubernetes.io/component"] == name {
			return w
		}
	}
	t.Fatalf("no workload of component %s", name)
	return workload{}
}

// podsSelected lists the pod templates of the workloads whose pods the selector matches.
func podsSelected(t *testing.T, r *release, selector map[string]string) []corev1.PodSpec {
	t.Helper()
	var out []corev1.PodSpec
	for _, w := range workloads(t, r) {
		if labels.SelectorFromSet(selector).Matches(labels.Set(w.Template.Labels)) {
			out = append(out, w.Template.Spec)
		}
	}
	return out
}

func hasPort(pod corev1.PodSpec, port intstr.IntOrString) bool {
	for _, c := range pod.Containers {
		for _, p := range c.Ports {
			if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
				return true
			}
		}
	}
	return false
}

func checkPod(t *testing.T, owner string, pod corev1.PodSpec, serviceAccounts map[string]bool) {
	t.Helper()
	if !serviceAccounts[pod.ServiceAccountName] {
		t.Errorf("%s runs as ServiceAccount %q, which the chart does not create", owner, pod.ServiceAccountName)
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v, want runAsNonRoot and seccomp RuntimeDefault", owner, psc)
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		sc := c.SecurityContext
		ok := sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot &&
			sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem &&
			sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation &&
			sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0 &&
			sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
		if !ok {
			t.Errorf("%s: container %s has securityContext %+v", owner, c.Name, sc)
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: container %s has no memory request or limit", owner, c.Name)
		}
	}
}

// checkProbes: liveness /healthz and readiness /readyz, on the metrics port the container
// declares.
func checkProbes(t *testing.T, owner string, c corev1.Container) {
	t.Helper()
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s: %s probe %+v, want GET %s on port metrics", owner, p.name, p.probe, p.path)
		}
	}
	if !hasPort(corev1.PodSpec{Containers: []corev1.Container{c}}, intstr.FromString("metrics")) {
		t.Errorf("%s declares no metrics port", owner)
	}
}

// checkEnv: every variable the chart sets is a setting of the README table that the
// command takes, set once, either as a value or from a Secret.
func checkEnv(t *testing.T, command string, c corev1.Container, settings map[string][]string) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range c.Env {
		if seen[e.Name] {
			t.Errorf("%s: %s is set twice", command, e.Name)
		}
		seen[e.Name] = true
		cmds, ok := settings[e.Name]
		switch {
		case !ok:
			t.Errorf("%s: %s is not in the README settings table", command, e.Name)
		case !slices.Contains(cmds, command):
			t.Errorf("%s: %s is a setting of %v only", command, e.Name, cmds)
		}
		if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef == nil || e.Value != "") {
			t.Errorf("%s: %s must come from a Secret key or a value, got %+v", command, e.Name, e)
		}
	}
	for _, name := range []string{"PARTNERSTREAM_LOG_LEVEL", "PARTNERSTREAM_METRICS_ADDR"} {
		if !seen[name] {
			t.Errorf("%s: %s is not set", command, name)
		}
	}
}

// readmeSettings reads the settings table of README.md: variable -> commands that take it.
func readmeSettings(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "<!-- settings:begin -->"):
			in = true
		case strings.Contains(line, "<!-- settings:end -->"):
			in = false
		case in && strings.HasPrefix(line, "| `--"):
			cells := strings.Split(line, " | ")
			env := strings.Trim(cells[1], "`")
			for _, c := range strings.Split(cells[3], ",") {
				out[env] = append(out[env], strings.TrimSpace(c))
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("README.md settings table: read %d settings; has its format changed?", len(out))
	}
	return out
}

func containerEnv(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

func wantSecretEnv(t *testing.T, env map[string]corev1.EnvVar, want map[string][2]string) {
	t.Helper()
	for name, ref := range want {
		e := env[name]
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != ref[0] || e.ValueFrom.SecretKeyRef.Key != ref[1] || e.Value != "" {
			t.Errorf("%s = %+v, want Secret %s key %s", name, e, ref[0], ref[1])
		}
	}
}

// wantRules are the RBAC rules of each component in the Webhook namespace, sorted.
var wantRules = map[string][]string{
	"controller": {
		"/events create,patch", "/secrets create,delete,get,list,patch,update,watch",
		"coordination.k8s.io/leases create", "coordination.k8s.io/leases get,update names=partnerstream-controller",
		"events.k8s.io/events create,patch",
		"partnerstream.io/webhooks get,list,patch,update,watch", "partnerstream.io/webhooks/finalizers update",
		"partnerstream.io/webhooks/status get,patch,update",
	},
	"deliver": {"/secrets get,list,watch", "partnerstream.io/webhooks get,list,patch,watch"},
	"api":     {"/secrets get", "partnerstream.io/webhooks create,delete,get,list,patch,update"},
}

// ruleStrings flattens rules into sorted "group/resource verbs" lines.
func ruleStrings(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		verbs := slices.Clone(r.Verbs)
		sort.Strings(verbs)
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				line := g + "/" + res + " " + strings.Join(verbs, ",")
				if len(r.ResourceNames) > 0 {
					line += " names=" + strings.Join(r.ResourceNames, ",")
				}
				out = append(out, line)
			}
		}
	}
	sort.Strings(out)
	return out
}

func checkRBAC(t *testing.T, r *release, serviceAccounts map[string]bool) {
	t.Helper()
	roles := map[string]*rbacv1.Role{}
	for _, role := range typed[rbacv1.Role](t, r, "Role") {
		roles[role.Namespace+"/"+role.Name] = role
		comp := role.Labels["app.kubernetes.io/component"]
		if got := ruleStrings(role.Rules); !slices.Equal(got, wantRules[comp]) {
			t.Errorf("Role of %s grants\n%s\nwant\n%s", comp, strings.Join(got, "\n"), strings.Join(wantRules[comp], "\n"))
		}
	}
	if len(roles) != len(wantRules) {
		t.Errorf("%d Roles, want one for each of %d components (ingest has none)", len(roles), len(wantRules))
	}
	for _, b := range typed[rbacv1.RoleBinding](t, r, "RoleBinding") {
		role := roles[b.Namespace+"/"+b.RoleRef.Name]
		if b.RoleRef.Kind != "Role" || role == nil {
			t.Errorf("RoleBinding %s refers to %s %s, not a Role of the chart in its namespace", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			continue
		}
		checkSubjects(t, b.Name, b.Subjects, role.Labels["app.kubernetes.io/component"], r.Namespace, serviceAccounts)
	}
	crs := typed[rbacv1.ClusterRole](t, r, "ClusterRole")
	if len(crs) != 1 || !slices.Equal(ruleStrings(crs[0].Rules), []string{"/namespaces get names=" + webhookNamespace(r)}) {
		t.Errorf("cluster-wide rights: %+v, want only get of the Webhook namespace", crs)
	}
	for _, b := range typed[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding") {
		if b.RoleRef.Name != crs[0].Name {
			t.Errorf("ClusterRoleBinding %s refers to %s", b.Name, b.RoleRef.Name)
		}
		checkSubjects(t, b.Name, b.Subjects, "controller", r.Namespace, serviceAccounts)
	}
}

// webhookNamespace is where the rendered controller looks for Webhooks.
func webhookNamespace(r *release) string {
	for _, o := range r.All("Role") {
		return o.GetNamespace()
	}
	return r.Namespace
}

func checkSubjects(t *testing.T, binding string, subjects []rbacv1.Subject, component, ns string, serviceAccounts map[string]bool) {
	t.Helper()
	if len(subjects) != 1 || subjects[0].Kind != "ServiceAccount" || subjects[0].Namespace != ns ||
		!serviceAccounts[subjects[0].Name] || !strings.HasSuffix(subjects[0].Name, "-"+component) {
		t.Errorf("binding %s grants %+v, want the %s ServiceAccount in %s", binding, subjects, component, ns)
	}
}

// checkDeliverNetworkPolicy: deliver reaches the internet and DNS, never private, link-local,
// loopback or the cluster's own addresses.
func checkDeliverNetworkPolicy(t *testing.T, r *release) {
	t.Helper()
	np := one[networkingv1.NetworkPolicy](t, r, "NetworkPolicy", "-deliver")
	if n := podsSelected(t, r, np.Spec.PodSelector.MatchLabels); len(n) != 1 || n[0].Containers[0].Name != "deliver" {
		t.Errorf("NetworkPolicy selects %v, want the deliver pods", np.Spec.PodSelector.MatchLabels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) {
		t.Errorf("policy types %v, want Egress only", np.Spec.PolicyTypes)
	}
	internet := np.Spec.Egress[0].To[0].IPBlock
	want := []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8", "198.18.0.0/15"}
	if internet == nil || internet.CIDR != "0.0.0.0/0" || !slices.Equal(internet.Except, want) {
		t.Errorf("internet egress %+v, want 0.0.0.0/0 except %v", internet, want)
	}
	dns := np.Spec.Egress[1]
	if len(dns.Ports) != 2 || dns.Ports[0].Port.IntValue() != 53 || dns.To[0].NamespaceSelector == nil {
		t.Errorf("DNS egress %+v", dns)
	}
	if len(np.Spec.Egress) != 3 || np.Spec.Egress[2].To[0].IPBlock.CIDR != "10.20.0.0/16" {
		t.Errorf("extraEgress is not appended: %+v", np.Spec.Egress)
	}
}

// unstructuredMap reads a map of strings at a path of an unstructured object.
func unstructuredMap(obj map[string]any, path ...string) (map[string]string, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[p]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, false, nil
	}
	out := map[string]string{}
	for k, v := range m {
		s, _ := v.(string)
		out[k] = s
	}
	return out, true, nil
}

// TestSchemaRejectsBadValues: values.schema.json stops a wrong value before anything renders.
func TestSchemaRejectsBadValues(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"an unknown top-level key", `replica: 3`, "additional properties 'replica' not allowed"},
		{"an unknown nested key", `api: {ingress: {host: x.example.com}}`, "additional properties 'host' not allowed"},
		{"negative replicas", `deliver: {replicas: -1}`, "/deliver/replicas"},
		{"replicas of the wrong type", `api: {replicas: "two"}`, "got string, want integer"},
		{"a log level that does not exist", `logLevel: verbose`, "/logLevel"},
		{"a duration Go cannot parse", `kafka: {retention: 7 days}`, "/kafka/retention"},
		{"a Postgres URL as plain text", `postgres: {url: {value: "postgres://u:p@h/db", secretName: "", secretKey: url}}`, "additional properties 'value' not allowed"},
		{"a trusted proxy that is a host name", `api: {trustedProxies: [ingress.local]}`, "/api/trustedProxies/0"},
		{"the PROXY protocol without trusted proxies", `api: {proxyProtocol: true}`, "/api/trustedProxies"},
		{"a SASL mechanism with no password Secret", `kafka: {sasl: {mechanism: SCRAM-SHA-512}}`, "/kafka/sasl/password/secretName"},
		{"a SASL mechanism Kafka clients do not speak", `kafka: {sasl: {mechanism: GSSAPI}}`, "/kafka/sasl/mechanism"},
		{"a Kafka TLS Secret with TLS off", `kafka: {tls: {secretName: kafka-ca}}`, "/kafka/tls/enabled"},
		{"a Kafka compression that does not exist", `kafka: {compression: brotli}`, "/kafka/compression"},
		{"a network policy CIDR that is not IPv4", `networkPolicy: {clusterCIDRs: ["fd00::/8"]}`, "/networkPolicy/clusterCIDRs/0"},
		{"a ClickHouse cluster name that is not an identifier", `clickhouse: {cluster: "my cluster"}`, "/clickhouse/cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, testNamespace, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestHelmLintStrict lints the chart with the default values and with every option on.
func TestHelmLintStrict(t *testing.T) {
	for _, values := range []string{"", allOptions + externalSecrets} {
		if out, err := runHelm(t, "lint", "--strict", chartDir, "-f", valuesFile(t, values)); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	}
}

// TestChartCRDsAreTheGeneratedOnes: the chart's CRDs are config/crd/bases byte for byte (run
// `make manifests helm-docs` after changing the API types).
func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	generated, err := filepath.Glob(filepath.Join(repoRoot, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	copies, _ := filepath.Glob(filepath.Join(chartDir, "files", "crds", "*.yaml"))
	if len(copies) != len(generated) {
		t.Errorf("the chart has %d CRDs, config/crd/bases %d: run `make helm-docs`", len(copies), len(generated))
	}
	for _, g := range generated {
		want, _ := os.ReadFile(g)
		got, err := os.ReadFile(filepath.Join(chartDir, "files", "crds", filepath.Base(g)))
		if err != nil || string(got) != string(want) {
			t.Errorf("charts/partnerstream/files/crds/%s differs from config/crd/bases: run `make helm-docs`", filepath.Base(g))
		}
	}
}

// metricName matches the platform's metric names in the dashboard and the alert rules.
var metricName = regexp.MustCompile(`\bpartnerstream_[a-z0-9_]+`)

// TestDashboardAndAlertsUseMetricsThatExist: every partnerstream_* series the dashboard and
// the rules query is on the /metrics of a component that has just started, before any
// traffic or failure: a labelled counter that appears only at its first increment would be
// "No data" in a panel and no value in an alert until then.
func TestDashboardAndAlertsUseMetricsThatExist(t *testing.T) {
	served := map[string]bool{}
	for _, body := range componentMetrics(t) {
		for name := range sampleNames(body) {
			served[name] = true
		}
	}
	r := mustRender(t, testNamespace, allOptions)
	var queries strings.Builder
	for _, kind := range []string{"ConfigMap", "PrometheusRule"} {
		b, _ := json.Marshal(r.All(kind)[0].Object)
		queries.Write(b)
	}
	// The PrometheusRule's spec is a Prometheus rule file: `promtool check rules` in make lint.
	dumpMetricsFile(t, "rules.yaml", r.All("PrometheusRule")[0].Object["spec"])
	used := map[string]bool{}
	for _, name := range metricName.FindAllString(queries.String(), -1) {
		used[name] = true
		if !served[name] {
			t.Errorf("the dashboard or the rules query %s, which no started component serves", name)
		}
	}
	for _, name := range []string{"partnerstream_delivery_attempts_total", "partnerstream_delivery_oldest_pending_age_seconds", "partnerstream_ingest_lag_seconds", "partnerstream_clicks_spool_bytes", "partnerstream_outbox_backlog"} {
		if !used[name] {
			t.Errorf("%s is not used by the dashboard or the alerts", name)
		}
	}
}
