package main

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strings"

	"github.com/partnerstream/partnerstream/internal/kafka/embedded"
)

// startBroker runs the embedded broker in a child process (this program with -broker): a
// production broker is another machine, and the embedded one keeps every message in memory,
// whose growing heap and copies must not burden the server's garbage collector.
func startBroker() (addr string, pid int, stop func(), err error) {
	cmd := exec.Command(os.Args[0], "-broker")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", 0, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", 0, nil, fmt.Errorf("start broker process: %w", err)
	}
	stop = func() { stdin.Close(); _ = cmd.Wait() }
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", 0, nil, fmt.Errorf("broker process: %w", err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid, stop, nil
}

// serveBroker is the child process of startBroker: it serves until its stdin closes.
func serveBroker() {
	b, err := embedded.Start(embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.Addrs()[0])
	_, _ = io.Copy(io.Discard, os.Stdin)
	b.Close()
}
