package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/partnerstream/partnerstream/internal/tracking"
)

func printTable(targets []target, counts []int, results map[string]map[int]wrkResult) {
	fmt.Println()
	fmt.Println("| connections | handler | requests/s | vs bare | p50 | p99 | CPU µs/req server + broker + wrk | server CPU vs bare | vs bare if CPU-bound | clicks recorded / spooled / dropped | produce requests p50 / p99 | target |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, n := range counts {
		bare := results["bare"][n]
		for _, tg := range targets {
			r := results[tg.name][n]
			ratio := r.rps / bare.rps
			clicks, produce, goal := "-", "-", ""
			if tg.mode != "" {
				clicks = fmt.Sprintf("%.0f / %.0f / %.0f", r.clicks.recorded, r.clicks.spooled, r.clicks.dropped)
				produce = fmt.Sprintf("%s / %s", r.produce.quantile(0.5), r.produce.quantile(0.99))
				goal = verdict(tg.mode, n, r, bare)
			}
			errs := ""
			if r.errors > 0 {
				errs = fmt.Sprintf(" (%d errors)", r.errors)
			}
			fmt.Printf("| %d | %s | %.0f%s | %.2fx | %s | %s | %.1f + %.1f + %.1f | %.2fx | %.2fx | %s | %s | %s |\n", n, tg.name, r.rps, errs, ratio,
				round(r.p50), round(r.p99), r.perRequest(r.serverCPU), r.perRequest(r.brokerCPU), r.perRequest(r.wrkCPU),
				r.perRequest(r.serverCPU)/bare.perRequest(bare.serverCPU), bare.cpuPerRequest()/r.cpuPerRequest(), clicks, produce, goal)
		}
	}
	fmt.Println()
	fmt.Println("\"vs bare if CPU-bound\" is the ratio of the CPU the whole loop spends per request: what the")
	fmt.Println("requests/s ratio would be on an otherwise idle machine where server, broker and wrk share the cores.")
}

// verdict checks the targets of the hot-path issue against the same run's bare handler:
// async at 64 connections at least 0.7x its requests/s with a p99 under 10 ms and at most
// 1.4x its server CPU per request; ack at 256 connections at least 0.35x its requests/s, a
// p99 at most twice its p99, and no click dropped.
func verdict(mode tracking.Mode, conns int, r, bare wrkResult) string {
	ratio := r.rps / bare.rps
	cpu := r.perRequest(r.serverCPU) / bare.perRequest(bare.serverCPU)
	var goals []string
	check := func(ok bool, goal string) {
		if !ok {
			goal = "MISSED " + goal
		}
		goals = append(goals, goal)
	}
	switch {
	case mode == tracking.ModeAsync && conns == 64:
		check(ratio >= 0.7, fmt.Sprintf("%.2fx >= 0.7x", ratio))
		check(r.p99 < 10*time.Millisecond, "p99 < 10 ms")
		check(cpu <= 1.4, fmt.Sprintf("CPU %.2fx <= 1.4x", cpu))
	case mode == tracking.ModeAck && conns == 256:
		check(ratio >= 0.35, fmt.Sprintf("%.2fx >= 0.35x", ratio))
		check(r.p99 <= 2*bare.p99, fmt.Sprintf("p99 %.1fx <= 2x bare", float64(r.p99)/float64(bare.p99)))
		check(r.clicks.dropped == 0, "none dropped")
	default:
		return ""
	}
	return strings.Join(goals, ", ")
}

func round(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%d µs", d.Microseconds())
	}
}
