// Command kubeplane is the test control plane of vllm-scaler in one binary: the first argument
// names the program, the rest are its own flags.
//
//	kubeplane etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kwok [flags]
//
// One binary instead of six: the Kubernetes components share most of their packages, so one
// build compiles them once and links once (the link is the longest single step on a small
// machine). Each command is the upstream program's own entry point, unchanged.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwok "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwoksignals "sigs.k8s.io/kwok/pkg/utils/signals"
)

const usage = "usage: kubeplane etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kwok [flags]"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	name := os.Args[1]
	// Each program parses os.Args[1:] as its own flags: drop the multi-call name.
	os.Args = os.Args[1:]
	switch name {
	case "etcd":
		etcdmain.Main(os.Args)
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubectl":
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	case "kwok":
		os.Exit(runKwok())
	default:
		fmt.Fprintf(os.Stderr, "kubeplane: unknown program %q\n%s\n", name, usage)
		os.Exit(2)
	}
}

// runKwok starts kwok as its own command does: the logging and --config flags are parsed
// first (they decide what the command is built with), then the command itself.
func runKwok() int {
	// The Kubernetes packages register their own global flags (--version of another type
	// among them), which cobra would merge into kwok's: kwok starts from an empty set.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
	flags := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flags.ParseErrorsAllowlist.UnknownFlags = true
	flags.Usage = func() {}
	ctx := kwoksignals.SetupSignalContext()
	ctx, logger := kwoklog.InitFlags(ctx, flags)
	ctx, err := kwokconfig.InitFlags(ctx, flags)
	if err != nil {
		logger.Error("kwok: cannot load its configuration", "err", err)
		return 1
	}
	command := kwok.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flags)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("kwok: exit", "err", err)
		return 1
	}
	return 0
}
