// SPDX-License-Identifier: Apache-2.0

// Command k8s-clientgo-elector is one client-go leaderelection elector as a
// process, for tests/interop/test_k8s_clientgo.py: RunOrDie with a LeaseLock
// on NAMESPACE/NAME, the credentials of a kubeconfig file. It prints one line
// per event on stdout, each stamped with the wall clock (Unix seconds with
// microseconds) when it happened:
//
//	1765069323.123456 LEADING id            this elector started leading
//	1765069323.123456 STOPPING id           its leadership's context ended: its work stops
//	                                        (before the release on SIGTERM; after a failed renewal)
//	1765069323.123456 STOPPED id            RunOrDie returned (after any release; also printed
//	                                        by an elector that never led)
//	1765069323.123456 NEW-LEADER holder     the Lease names a new holder
//	1765069323.123456 EXIT id               it is exiting (after SIGTERM/SIGINT)
//
// After a loss of leadership it runs for it again (a process that has lost
// its Lease keeps competing) unless -once. SIGTERM or SIGINT cancels the
// election's context: with -release-on-cancel (the default) a leader writes
// client-go's release (holderIdentity "", leaseDurationSeconds 1) first, then
// the process exits with status 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

var outMu sync.Mutex

func say(event, who string) {
	now := time.Now()
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(os.Stdout, "%d.%06d %s %s\n", now.Unix(), now.Nanosecond()/1000, event, who)
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	namespace := flag.String("namespace", "", "the Lease's namespace")
	name := flag.String("name", "", "the Lease's name")
	id := flag.String("id", "", "this elector's identity (holderIdentity)")
	leaseDuration := flag.Duration("lease-duration", 15*time.Second, "LeaseDuration")
	renewDeadline := flag.Duration("renew-deadline", 10*time.Second, "RenewDeadline")
	retryPeriod := flag.Duration("retry-period", 2*time.Second, "RetryPeriod")
	releaseOnCancel := flag.Bool("release-on-cancel", true, "ReleaseOnCancel")
	once := flag.Bool("once", false, "exit after the first loss of leadership")
	flag.Parse()
	if *namespace == "" || *name == "" || *id == "" || *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "usage: k8s-clientgo-elector -kubeconfig FILE -namespace NS -name NAME -id ID [timings]")
		os.Exit(2)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubeconfig %s: %v\n", *kubeconfig, err)
		os.Exit(1)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "client: %v\n", err)
		os.Exit(1)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		cancel()
	}()

	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: *namespace, Name: *name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: *id},
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   *leaseDuration,
			RenewDeadline:   *renewDeadline,
			RetryPeriod:     *retryPeriod,
			ReleaseOnCancel: *releaseOnCancel,
			Name:            *name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					say("LEADING", *id)
					<-ctx.Done() // the leader's work stops here (before a release)
					say("STOPPING", *id)
				},
				OnStoppedLeading: func() { say("STOPPED", *id) },
				OnNewLeader:      func(holder string) { say("NEW-LEADER", holder) },
			},
		})
		if *once {
			break
		}
	}
	say("EXIT", *id)
}
