package smoke

import (
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// sntpListen is where the harness answers NTP: QEMU's user networking
// hands the guest's datagrams for HostFromVM (the first server the
// emulated metadata names) to the host's loopback.
const sntpListen = "127.0.0.1:123"

// sntpServer answers SNTP client requests with the host's clock, so the
// node's timesyncd really synchronises during the run.
type sntpServer struct {
	conn   *net.UDPConn
	served atomic.Int64
}

// startSNTP listens on sntpListen. A port already taken (an NTP daemon on
// the host) is not an error: that server answers the guest instead.
func startSNTP() (*sntpServer, error) {
	addr, _ := net.ResolveUDPAddr("udp", sntpListen)
	conn, err := net.ListenUDP("udp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s := &sntpServer{conn: conn}
	go s.serve()
	return s, nil
}

func (s *sntpServer) serve() {
	buf := make([]byte, 512)
	for {
		n, from, err := s.conn.ReadFromUDP(buf)
		if err != nil {
			return // closed
		}
		if reply, ok := SNTPReply(buf[:n], time.Now()); ok {
			if _, err := s.conn.WriteToUDP(reply, from); err == nil {
				s.served.Add(1)
			}
		}
	}
}

func (s *sntpServer) Close() {
	if s != nil {
		s.conn.Close()
	}
}

// ntpEpoch is 1900-01-01 in Unix seconds.
const ntpEpoch = 2208988800

func ntpTime(t time.Time) uint64 {
	return uint64(t.Unix()+ntpEpoch)<<32 | uint64(t.Nanosecond())<<32/1e9
}

// SNTPReply answers one client request (RFC 4330): a stratum 2 server in
// sync, echoing the client's transmit time as the origin. ok is false for
// anything that is not a client request.
func SNTPReply(req []byte, now time.Time) ([]byte, bool) {
	if len(req) < 48 || req[0]&7 != 3 { // mode 3: client
		return nil, false
	}
	vn := req[0] >> 3 & 7
	if vn < 3 || vn > 4 {
		return nil, false
	}
	out := make([]byte, 48)
	out[0] = vn<<3 | 4                        // leap 0 (in sync), server mode
	out[1] = 2                                // stratum
	out[2] = req[2]                           // poll
	out[3] = 0xec                             // precision 2^-20 s
	binary.BigEndian.PutUint32(out[8:], 0x10) // root dispersion: ~0.2 ms
	copy(out[12:16], []byte{127, 0, 0, 1})    // reference ID
	ts := ntpTime(now)
	binary.BigEndian.PutUint64(out[16:], ts) // reference
	copy(out[24:32], req[40:48])             // origin: the client's transmit
	binary.BigEndian.PutUint64(out[32:], ts) // receive
	binary.BigEndian.PutUint64(out[40:], ts) // transmit
	return out, true
}
