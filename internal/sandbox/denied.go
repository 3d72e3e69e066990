package sandbox

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Denied is a connection the allow-list proxy refused: where the
// sandboxed process tried to go, and when.
type Denied struct {
	Host string    `json:"host"`
	Port int       `json:"port"`
	At   time.Time `json:"at"`
}

// allowed is one entry of the proxy's allow list: a host (or, with
// wildcard, every subdomain of it) on one port, or on 80 and 443 when
// port is 0.
type allowed struct {
	host     string
	port     int
	wildcard bool
}

// parseAllowed reads an allow-list entry: "host", "host:port",
// "*.domain", "*.domain:port", an IP literal, "[::1]:port".
func parseAllowed(s string) (allowed, error) {
	entry := strings.ToLower(strings.TrimSpace(s))
	host, port := entry, 0
	if h, p, err := net.SplitHostPort(entry); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return allowed{}, fmt.Errorf("allowed host %q: the port must be a number from 1 to 65535", s)
		}
		host, port = h, n
	} else if strings.HasPrefix(entry, "[") || (strings.Count(entry, ":") == 1) {
		return allowed{}, fmt.Errorf("allowed host %q: %v", s, err)
	}
	a := allowed{host: strings.TrimSuffix(host, "."), port: port}
	if rest, ok := strings.CutPrefix(a.host, "*."); ok {
		a.host, a.wildcard = rest, true
	}
	if a.host == "" || strings.ContainsAny(a.host, "/*@ ") || (strings.Contains(a.host, ":") && !isIP(a.host)) {
		return allowed{}, fmt.Errorf("allowed host %q: give a host name, \"host:port\", \"*.domain\" or an IP address, without a scheme or path", s)
	}
	return a, nil
}

// CheckAllowed says what is wrong with an allow-list entry ([sandbox]
// allow_hosts), nil when nothing is.
func CheckAllowed(entry string) error {
	_, err := parseAllowed(entry)
	return err
}

// match reports whether host:port is allowed by a.
func (a allowed) match(host string, port int) bool {
	if a.port == 0 && port != 80 && port != 443 || a.port != 0 && port != a.port {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a.wildcard {
		return strings.HasSuffix(host, "."+a.host)
	}
	if x, err := netip.ParseAddr(host); err == nil {
		y, err := netip.ParseAddr(a.host)
		return err == nil && x.Unmap() == y.Unmap()
	}
	return host == a.host
}

// loopback reports whether a names one address on this machine's
// loopback with its port: the forwarder listens on those inside the
// sandbox, so that a base URL like http://127.0.0.1:8787 works unchanged.
func (a allowed) loopback() bool {
	if a.port == 0 || a.wildcard {
		return false
	}
	if a.host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(a.host)
	return err == nil && ip.IsLoopback()
}

func (a allowed) String() string {
	host := a.host
	if a.wildcard {
		host = "*." + host
	}
	if a.port == 0 {
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(a.port))
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
