package harness

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Ports for the processes a test starts. A port a test picks is bound by the process it
// starts a moment later; in between nothing holds it. Two things took such ports when
// listening on :0 picked them, and both broke a system silently (its process failed to bind
// and exited, while a health check on the port was answered by someone else's service):
//   - :0 hands out ports of the kernel's ephemeral range, which are also the source ports of
//     every outbound connection on the machine;
//   - another test process (go test -p 2 runs e2e, e2e/chaos and e2e/fuzz side by side) may be
//     handed the same port before the first one's process binds it.
// So ports come from below the ephemeral range (32768 and up on Linux), and each is reserved
// across test processes by a file created exclusively in a shared directory, removed when the
// test ends. A reservation older than staleReservation was left by a test process that died.

const (
	portLow, portHigh = 20000, 32000
	staleReservation  = 2 * time.Hour
)

var reserved = struct { //nolint:gochecknoglobals // test infrastructure: this process's reservations
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreeAddr returns "127.0.0.1:<port>" with a port no other test (in this process or another)
// is handed until t ends, and that nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(reservePort(t)))
}

func reservePort(t testing.TB) int {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "svc-e2e-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatalf("harness: port reservations: %v", err)
	}
	reserved.Lock()
	defer reserved.Unlock()
	for range 4000 {
		port := portLow + rand.IntN(portHigh-portLow)
		if reserved.ports[port] {
			continue
		}
		file := filepath.Join(dir, strconv.Itoa(port))
		if !claim(file) {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			_ = os.Remove(file)
			continue
		}
		_ = ln.Close()
		reserved.ports[port] = true
		t.Cleanup(func() {
			reserved.Lock()
			delete(reserved.ports, port)
			reserved.Unlock()
			_ = os.Remove(file)
		})
		return port
	}
	t.Fatalf("harness: no free port between %d and %d", portLow, portHigh)
	return 0
}

// claim creates file exclusively; a reservation left by a dead test process is taken over.
func claim(file string) bool {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		_ = f.Close()
		return true
	}
	if !errors.Is(err, fs.ErrExist) {
		return false
	}
	info, err := os.Stat(file)
	if err != nil || time.Since(info.ModTime()) < staleReservation {
		return false
	}
	now := time.Now()
	return os.Chtimes(file, now, now) == nil
}
