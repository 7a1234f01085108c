// Command clientgo-probe runs client-go (the version vc-scheduler v1.14 links) against a
// Kubernetes API front and reports, one JSON object per line on stdout, what it did and saw.
// The tests of the front (tests/kube_api/test_clientgo.py) drive it and assert on the lines.
//
// Every line has "t" (its type). Every HTTP exchange is reported as
//
//	{"t":"request","method":..,"path":..,"query":..,"contentType":..,"code":..}
//
// Scenarios (first argument), all with --server URL:
//
//	informers     shared informers for pods, nodes (client-go) and podgroups (volcano.sh/apis'
//	              typed informer), plus a pods informer with --field-selector if given. Prints
//	              {"t":"synced",...} then one {"t":"event",...} per handler call, and on each
//	              "dump" line on stdin {"t":"state",...} (every informer's keys -> RV). Ends
//	              when stdin closes.
//	elect         leader election on a Lease (resourcelock.LeaseLock) as --id; prints
//	              {"t":"leading"}, {"t":"new-leader"}, {"t":"stopped-leading"}. Ends on SIGTERM
//	              or when killed.
//	status-update GET a pod, set PodScheduled=False (Unschedulable) and status.nominatedNodeName,
//	              UpdateStatus through the typed client (a protobuf body by default), then, with
//	              --delete, DELETE it with a UID precondition (a protobuf DeleteOptions body).
//	              Prints {"t":"updated",...} and {"t":"deleted",...}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	vcclient "volcano.sh/apis/pkg/client/clientset/versioned"
	vcinformers "volcano.sh/apis/pkg/client/informers/externalversions"
)

var out = struct {
	sync.Mutex
	w *bufio.Writer
}{w: bufio.NewWriter(os.Stdout)}

// emit writes one JSON line and flushes it, so the reader sees it at once.
func emit(fields map[string]any) {
	b, err := json.Marshal(fields)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"t": "error", "error": err.Error()})
	}
	out.Lock()
	defer out.Unlock()
	out.w.Write(b)
	out.w.WriteByte('\n')
	out.w.Flush()
}

func fatal(format string, args ...any) {
	emit(map[string]any{"t": "error", "error": fmt.Sprintf(format, args...)})
	os.Exit(1)
}

// loggingTransport reports every request and its status code.
type loggingTransport struct{ next http.RoundTripper }

func (l loggingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	line := map[string]any{"t": "request", "method": req.Method, "path": req.URL.Path,
		"query": req.URL.RawQuery, "contentType": req.Header.Get("Content-Type"),
		"accept": req.Header.Get("Accept")}
	if err != nil {
		line["error"] = err.Error()
	} else {
		line["code"] = resp.StatusCode
		line["responseType"] = resp.Header.Get("Content-Type")
	}
	emit(line)
	return resp, err
}

func config(server string) *rest.Config {
	if server == "" {
		fatal("--server URL is required")
	}
	cfg := &rest.Config{Host: server, QPS: 200, Burst: 400, Timeout: 30 * time.Second}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return loggingTransport{rt} }
	return cfg
}

func objKey(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Key
	}
	k, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return k
}

func describe(obj any) map[string]any {
	m := map[string]any{}
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		m["tombstone"] = true
		obj = d.Obj
	}
	if acc, ok := obj.(metav1.Object); ok {
		m["rv"] = acc.GetResourceVersion()
		m["uid"] = string(acc.GetUID())
	}
	if p, ok := obj.(*corev1.Pod); ok {
		m["nodeName"] = p.Spec.NodeName
		m["phase"] = string(p.Status.Phase)
		m["nominatedNodeName"] = p.Status.NominatedNodeName
	}
	return m
}

func handler(name string) cache.ResourceEventHandlerFuncs {
	send := func(typ string, obj any) {
		line := describe(obj)
		line["t"], line["informer"], line["type"], line["key"] = "event", name, typ, objKey(obj)
		emit(line)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { send("add", obj) },
		UpdateFunc: func(_, obj any) { send("update", obj) },
		DeleteFunc: func(obj any) { send("delete", obj) },
	}
}

func state(stores map[string]cache.Store) map[string]any {
	st := map[string]any{}
	for name, s := range stores {
		keys := map[string]string{}
		for _, obj := range s.List() {
			keys[objKey(obj)] = obj.(metav1.Object).GetResourceVersion()
		}
		st[name] = keys
	}
	return st
}

func sortedKeys(s cache.Store) []string {
	k := s.ListKeys()
	sort.Strings(k)
	return k
}

func runInformers(args []string) {
	fs := flag.NewFlagSet("informers", flag.ExitOnError)
	server := fs.String("server", "", "API front URL")
	fieldSelector := fs.String("field-selector", "", "also run a pods informer with this field selector")
	syncTimeout := fs.Duration("sync-timeout", 60*time.Second, "give up waiting for the caches after this")
	fs.Parse(args)
	cfg := config(*server)
	kube := kubernetes.NewForConfigOrDie(cfg)
	vc := vcclient.NewForConfigOrDie(cfg)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(kube, 0)
	vcFactory := vcinformers.NewSharedInformerFactory(vc, 0)
	pods := factory.Core().V1().Pods().Informer()
	nodes := factory.Core().V1().Nodes().Informer()
	podgroups := vcFactory.Scheduling().V1beta1().PodGroups().Informer()
	pods.AddEventHandler(handler("pods"))
	nodes.AddEventHandler(handler("nodes"))
	podgroups.AddEventHandler(handler("podgroups"))
	stores := map[string]cache.Store{"pods": pods.GetStore(), "nodes": nodes.GetStore(),
		"podgroups": podgroups.GetStore()}
	synced := []cache.InformerSynced{pods.HasSynced, nodes.HasSynced, podgroups.HasSynced}

	if *fieldSelector != "" {
		filtered := informers.NewSharedInformerFactoryWithOptions(kube, 0,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = *fieldSelector }))
		sel := filtered.Core().V1().Pods().Informer()
		sel.AddEventHandler(handler("pods-selected"))
		stores["pods-selected"] = sel.GetStore()
		synced = append(synced, sel.HasSynced)
		filtered.Start(ctx.Done())
	}
	factory.Start(ctx.Done())
	vcFactory.Start(ctx.Done())

	syncCtx, syncCancel := context.WithTimeout(ctx, *syncTimeout)
	ok := cache.WaitForCacheSync(syncCtx.Done(), synced...)
	syncCancel()
	if !ok {
		fatal("caches did not sync within %s", *syncTimeout)
	}
	line := map[string]any{"t": "synced"}
	for name, s := range stores {
		line[name] = sortedKeys(s)
	}
	emit(line)

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "dump":
			emit(map[string]any{"t": "state", "stores": state(stores)})
		case "":
		default:
			emit(map[string]any{"t": "error", "error": fmt.Sprintf("unknown command %q (want dump)", in.Text())})
		}
	}
	emit(map[string]any{"t": "exit"})
}

func runElect(args []string) {
	fs := flag.NewFlagSet("elect", flag.ExitOnError)
	server := fs.String("server", "", "API front URL")
	id := fs.String("id", "", "this candidate's identity")
	ns := fs.String("lease-namespace", "volcano-system", "the Lease's namespace")
	name := fs.String("lease-name", "volcano", "the Lease's name")
	leaseDuration := fs.Duration("lease-duration", 15*time.Second, "LeaseDuration")
	renewDeadline := fs.Duration("renew-deadline", 10*time.Second, "RenewDeadline")
	retryPeriod := fs.Duration("retry-period", 2*time.Second, "RetryPeriod")
	fs.Parse(args)
	if *id == "" {
		fatal("--id is required")
	}
	kube := kubernetes.NewForConfigOrDie(config(*server))
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: *ns, Name: *name},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: *id},
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	emit(map[string]any{"t": "candidate", "id": *id, "pid": os.Getpid()})
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: *leaseDuration,
		RenewDeadline: *renewDeadline,
		RetryPeriod:   *retryPeriod,
		Name:          *name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				emit(map[string]any{"t": "leading", "id": *id, "wall": float64(time.Now().UnixNano()) / 1e9})
				<-ctx.Done()
			},
			OnStoppedLeading: func() {
				emit(map[string]any{"t": "stopped-leading", "id": *id})
			},
			OnNewLeader: func(identity string) {
				emit(map[string]any{"t": "new-leader", "id": *id, "leader": identity,
					"wall": float64(time.Now().UnixNano()) / 1e9})
			},
		},
	})
	emit(map[string]any{"t": "exit", "id": *id})
}

func runStatusUpdate(args []string) {
	fs := flag.NewFlagSet("status-update", flag.ExitOnError)
	server := fs.String("server", "", "API front URL")
	ns := fs.String("namespace", "default", "the pod's namespace")
	name := fs.String("name", "", "the pod's name")
	nnn := fs.String("nominated-node", "", "status.nominatedNodeName to set")
	del := fs.Bool("delete", false, "then delete the pod with a UID precondition")
	fs.Parse(args)
	if *name == "" {
		fatal("--name is required")
	}
	kube := kubernetes.NewForConfigOrDie(config(*server))
	ctx := context.Background()
	pods := kube.CoreV1().Pods(*ns)
	pod, err := pods.Get(ctx, *name, metav1.GetOptions{})
	if err != nil {
		fatal("get pod %s/%s: %v", *ns, *name, err)
	}
	pod.Status.NominatedNodeName = *nnn
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient cpu.",
		LastTransitionTime: metav1.NewTime(time.Date(2026, 11, 27, 19, 22, 51, 0, time.UTC))}
	replaced := false
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == cond.Type {
			pod.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		pod.Status.Conditions = append(pod.Status.Conditions, cond)
	}
	updated, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		fatal("update status of pod %s/%s: %v", *ns, *name, err)
	}
	emit(map[string]any{"t": "updated", "key": *ns + "/" + *name, "sentRV": pod.ResourceVersion,
		"rv": updated.ResourceVersion, "nominatedNodeName": updated.Status.NominatedNodeName,
		"conditions": updated.Status.Conditions})
	if *del {
		uid := updated.UID
		grace := int64(0)
		err := pods.Delete(ctx, *name, metav1.DeleteOptions{GracePeriodSeconds: &grace,
			Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil {
			fatal("delete pod %s/%s: %v", *ns, *name, err)
		}
		emit(map[string]any{"t": "deleted", "key": *ns + "/" + *name, "uid": string(uid)})
	}
}

func main() {
	klog.InitFlags(nil)
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: clientgo-probe informers|elect|status-update --server URL [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "informers":
		runInformers(os.Args[2:])
	case "elect":
		runElect(os.Args[2:])
	case "status-update":
		runStatusUpdate(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "unknown scenario %q: want informers, elect or status-update\n", os.Args[1])
		os.Exit(2)
	}
}
