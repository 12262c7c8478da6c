// SPDX-License-Identifier: Apache-2.0

// Command k8scheck checks the Kubernetes example of s3lect
// (examples/kubernetes/s3lect.yaml): every document of the multi-document
// YAML is decoded strictly (unknown fields are errors) into the typed object
// of its kind, unknown kinds are errors, and the invariants the example
// promises are checked (see examples/kubernetes/README.md). It prints one
// line per problem and exits 1 if there is any; 0 and "ok" otherwise.
//
//	k8scheck FILE.yaml
package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// requestTimeout is the S3 request timeout of the CLI (docs/s3.md: 10 s per
// request): a stop may wait for one request in flight and then the release.
const requestTimeout = 10 * time.Second

var problems []string

func fail(format string, args ...any) {
	problems = append(problems, fmt.Sprintf(format, args...))
}

// splitDocuments splits a YAML stream at "---" lines; empty documents
// (comments only) are dropped.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if strings.TrimSpace(stripComments(cur.String())) != "" {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.TrimRight(line, " \t\r\n") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return docs
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: k8scheck FILE.yaml")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8scheck:", err)
		os.Exit(2)
	}
	var deployments []*appsv1.Deployment
	var pdbs []*policyv1.PodDisruptionBudget
	var services []*corev1.Service
	accounts := map[string]*corev1.ServiceAccount{}
	for i, doc := range splitDocuments(data) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			fail("document %d: not YAML: %v", i+1, err)
			continue
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			d := &appsv1.Deployment{}
			deployments = append(deployments, d)
			obj = d
		case "v1 ServiceAccount":
			sa := &corev1.ServiceAccount{}
			obj = sa
		case "v1 Service":
			svc := &corev1.Service{}
			services = append(services, svc)
			obj = svc
		case "policy/v1 PodDisruptionBudget":
			p := &policyv1.PodDisruptionBudget{}
			pdbs = append(pdbs, p)
			obj = p
		default:
			fail("document %d: unknown kind %q (apiVersion %q)", i+1, tm.Kind, tm.APIVersion)
			continue
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			fail("document %d (%s): strict decoding: %v", i+1, tm.Kind, err)
		}
		if sa, ok := obj.(*corev1.ServiceAccount); ok {
			accounts[sa.Name] = sa
		}
	}
	if len(deployments) != 1 {
		fail("want exactly one Deployment, found %d", len(deployments))
	}
	for _, d := range deployments {
		checkDeployment(d, accounts)
		checkBudget(d, pdbs)
		checkService(d, services)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Println("k8scheck:", p)
		}
		os.Exit(1)
	}
	fmt.Println("ok")
}

var roleARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]+$`)

func checkDeployment(d *appsv1.Deployment, accounts map[string]*corev1.ServiceAccount) {
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		fail("Deployment %s: want replicas: 3", d.Name)
	}
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 {
		fail("Deployment %s: no selector.matchLabels", d.Name)
	} else {
		for k, v := range d.Spec.Selector.MatchLabels {
			if d.Spec.Template.Labels[k] != v {
				fail("Deployment %s: the pod template lacks the selector's label %s=%s", d.Name, k, v)
			}
		}
	}
	pod := d.Spec.Template.Spec
	sa, ok := accounts[pod.ServiceAccountName]
	if pod.ServiceAccountName == "" || !ok {
		fail("Deployment %s: serviceAccountName %q is not a ServiceAccount of this file", d.Name, pod.ServiceAccountName)
	} else if arn := sa.Annotations["eks.amazonaws.com/role-arn"]; !roleARN.MatchString(arn) {
		fail("ServiceAccount %s: annotation eks.amazonaws.com/role-arn %q is not an IAM role ARN", sa.Name, arn)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		fail("Deployment %s: pod securityContext.runAsNonRoot must be true", d.Name)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		fail("Deployment %s: automountServiceAccountToken must be false (s3lect needs no Kubernetes API access; IRSA's token is a volume of its own)", d.Name)
	}
	// Only the leader is Ready (readiness on /leader): a rolling update that
	// keeps any pod available waits for a new pod to become Ready, which it
	// cannot while the old leader holds the lock.
	if st := d.Spec.Strategy; st.Type != appsv1.RecreateDeploymentStrategyType {
		mu := st.RollingUpdate
		if mu == nil || mu.MaxUnavailable == nil ||
			!(mu.MaxUnavailable.Type == intstr.String && mu.MaxUnavailable.StrVal == "100%") &&
				!(mu.MaxUnavailable.Type == intstr.Int && d.Spec.Replicas != nil && mu.MaxUnavailable.IntVal >= *d.Spec.Replicas) {
			fail("Deployment %s: rollingUpdate.maxUnavailable must be 100%% (only the leader is Ready: a rollout that keeps a pod available never ends)", d.Name)
		}
	}
	var s3lect *corev1.Container
	for i := range pod.Containers {
		c := &pod.Containers[i]
		argv := append(append([]string{}, c.Command...), c.Args...)
		for j, a := range argv {
			if a == "run" && j > 0 && strings.HasSuffix(argv[j-1], "s3lect") {
				s3lect = c
			}
		}
	}
	if s3lect == nil {
		fail("Deployment %s: no container runs `s3lect run`", d.Name)
		return
	}
	checkContainer(d, s3lect)
}

// option returns the value of --name in argv (before "--"), else of the
// environment variable S3LECT_NAME, else "".
func option(c *corev1.Container, argv []string, name string) (string, bool) {
	for i, a := range argv {
		if a == "--" {
			break
		}
		if a == "--"+name {
			if name == "peer" {
				return "1", true
			}
			if i+1 < len(argv) {
				return argv[i+1], true
			}
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	env := "S3LECT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	for _, e := range c.Env {
		if e.Name == env {
			return e.Value, true
		}
	}
	return "", false
}

func port(hostport string) (int32, bool) {
	i := strings.LastIndex(hostport, ":")
	if i < 0 {
		return 0, false
	}
	p, err := strconv.Atoi(hostport[i+1:])
	return int32(p), err == nil && p > 0 && p < 65536
}

func checkContainer(d *appsv1.Deployment, c *corev1.Container) {
	argv := append(append([]string{}, c.Command...), c.Args...)
	dashes := -1
	for i, a := range argv {
		if a == "--" {
			dashes = i
			break
		}
	}
	if dashes < 0 || dashes == len(argv)-1 {
		fail("container %s: no command after `--`", c.Name)
	}
	if v, ok := option(c, argv, "peer"); !ok || !(v == "1" || v == "true" || v == "yes" || v == "on") {
		fail("container %s: peer mode is off (want --peer or S3LECT_PEER=1)", c.Name)
	}
	if v, ok := option(c, argv, "lock"); !ok || !strings.HasPrefix(v, "s3://") {
		fail("container %s: the lock is not an s3:// URL (--lock or S3LECT_LOCK): %q", c.Name, v)
	}
	// POD_IP from the downward API, defined before anything that uses $(POD_IP).
	podIP := -1
	for i, e := range c.Env {
		if e.Name == "POD_IP" {
			podIP = i
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
				fail("container %s: POD_IP must come from fieldRef status.podIP", c.Name)
			}
		} else if strings.Contains(e.Value, "$(POD_IP)") && podIP < 0 {
			fail("container %s: env %s uses $(POD_IP) before POD_IP is defined", c.Name, e.Name)
		}
	}
	if podIP < 0 {
		fail("container %s: no env POD_IP", c.Name)
	}
	ports := map[int32]bool{}
	for _, p := range c.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			ports[p.ContainerPort] = true
		}
	}
	addr, _ := option(c, argv, "addr")
	if addr == "" {
		addr, _ = option(c, argv, "server-addr")
	}
	ap, ok := port(addr)
	if !strings.HasPrefix(addr, "$(POD_IP):") || !ok {
		fail("container %s: the advertised address must be $(POD_IP):PORT (--addr or S3LECT_ADDR), got %q", c.Name, addr)
	}
	listen, _ := option(c, argv, "peer-listen")
	lp, ok := port(listen)
	if !ok {
		fail("container %s: --peer-listen HOST:PORT missing (%q)", c.Name, listen)
	} else if lp != ap {
		fail("container %s: --peer-listen port %d differs from the advertised port %d", c.Name, lp, ap)
	}
	if ok && !ports[lp] {
		fail("container %s: no TCP containerPort %d for the peer endpoint", c.Name, lp)
	}
	metrics, _ := option(c, argv, "metrics-listen")
	mp, mok := port(metrics)
	if !mok {
		fail("container %s: --metrics-listen HOST:PORT missing (%q)", c.Name, metrics)
	} else if !ports[mp] {
		fail("container %s: no TCP containerPort %d for the metrics endpoint", c.Name, mp)
	}
	probePort := func(p intstr.IntOrString) int32 {
		if p.Type == intstr.String {
			for _, cp := range c.Ports {
				if cp.Name == p.StrVal {
					return cp.ContainerPort
				}
			}
			return -1
		}
		return p.IntVal
	}
	// Probes on the metrics port: liveness on /healthz (200 on every healthy
	// node: a follower is healthy), readiness on /leader (only the leader is
	// Ready, so the Service routes to it). Never leadership for liveness (it
	// would restart the followers forever), never the peer endpoint.
	for _, pr := range []struct {
		name, path, why string
		p               *corev1.Probe
	}{
		{"livenessProbe", "/healthz", "a follower is healthy", c.LivenessProbe},
		{"readinessProbe", "/leader", "only the leader is Ready", c.ReadinessProbe},
	} {
		switch {
		case pr.p == nil:
			fail("container %s: no %s", c.Name, pr.name)
		case pr.p.HTTPGet == nil || pr.p.HTTPGet.Path != pr.path || probePort(pr.p.HTTPGet.Port) != mp:
			fail("container %s: %s must GET %s on port %d (%s)", c.Name, pr.name, pr.path, mp, pr.why)
		}
	}
	// The grace period must cover the supervisor's worst stop: a store request
	// in flight, the kill timeout, then the release request.
	lease := 15 * time.Second
	if v, ok := option(c, argv, "lease-timeout"); ok {
		l, err := time.ParseDuration(v)
		if err != nil {
			fail("container %s: lease timeout %q: %v", c.Name, v, err)
		} else {
			lease = l
		}
	}
	deadline := lease * 2 / 3
	if v, ok := option(c, argv, "renew-deadline"); ok {
		if l, err := time.ParseDuration(v); err == nil {
			deadline = l
		}
	}
	margin := lease*2/1000 + 250*time.Millisecond
	killTimeout := lease - deadline - margin
	if v, ok := option(c, argv, "kill-timeout"); ok {
		if l, err := time.ParseDuration(v); err == nil && l < killTimeout {
			killTimeout = l
		}
	}
	worst := requestTimeout + killTimeout + requestTimeout
	g := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if g == nil || time.Duration(*g)*time.Second <= worst {
		fail("Deployment %s: terminationGracePeriodSeconds must exceed the worst stop time %v (request in flight %v + kill timeout %v + release %v)",
			d.Name, worst, requestTimeout, killTimeout, requestTimeout)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		fail("container %s: securityContext.readOnlyRootFilesystem must be true", c.Name)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		fail("container %s: securityContext.allowPrivilegeEscalation must be false", c.Name)
	}
	if sc != nil && sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
		fail("container %s: securityContext.runAsNonRoot is false", c.Name)
	}
	r := c.Resources
	if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
		fail("container %s: resources must request cpu and memory and limit memory", c.Name)
	}
}

// selects: labels (non-empty) all on the Deployment's pod template.
func selects(d *appsv1.Deployment, labels map[string]string) bool {
	match := len(labels) > 0
	for k, v := range labels {
		if d.Spec.Template.Labels[k] != v {
			match = false
		}
	}
	return match
}

// checkBudget: no PodDisruptionBudget selects the Deployment's pods. A
// budget counts Ready pods and only the leader is Ready: one that protects a
// standby also refuses to evict the leader, and a drain of its node hangs.
func checkBudget(d *appsv1.Deployment, pdbs []*policyv1.PodDisruptionBudget) {
	for _, p := range pdbs {
		if p.Spec.Selector != nil && selects(d, p.Spec.Selector.MatchLabels) {
			fail("PodDisruptionBudget %s selects the pods: only the leader is Ready, so the budget would block the leader's eviction (drains hang)", p.Name)
		}
	}
}

// checkService: a Service selects the Deployment's pods, routes to a port
// the pods declare, and only to Ready pods (the leader).
func checkService(d *appsv1.Deployment, services []*corev1.Service) {
	declared := map[string]bool{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			declared[p.Name] = p.Name != ""
			declared[strconv.Itoa(int(p.ContainerPort))] = true
		}
	}
	found := false
	for _, s := range services {
		if !selects(d, s.Spec.Selector) {
			continue
		}
		found = true
		if s.Spec.PublishNotReadyAddresses {
			fail("Service %s: publishNotReadyAddresses would route to the followers", s.Name)
		}
		for _, p := range s.Spec.Ports {
			if !declared[p.TargetPort.String()] {
				fail("Service %s: targetPort %s is not a port of the pods", s.Name, p.TargetPort.String())
			}
		}
	}
	if !found {
		fail("Deployment %s: no Service selects its pods", d.Name)
	}
}
