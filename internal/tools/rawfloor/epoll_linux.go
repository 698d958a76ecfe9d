package main

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"
)

// epollCycles: one thread, raw syscalls; only the time to the quorum-th
// reply of each fan-out is counted.
func epollCycles(addrs []string, n int) ([]time.Duration, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(epfd)
	var fds []int
	for _, a := range addrs {
		c, err := net.Dial("tcp", a)
		if err != nil {
			return nil, err
		}
		f, err := c.(*net.TCPConn).File() // a blocking dup of the socket
		c.Close()
		if err != nil {
			return nil, err
		}
		defer f.Close()
		fd := int(f.Fd())
		if err := syscall.SetNonblock(fd, true); err != nil {
			return nil, err
		}
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
		if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return nil, err
		}
		fds = append(fds, fd)
	}
	buf := make([]byte, 512)
	evs := make([]syscall.EpollEvent, len(fds))
	got := make(map[int32]bool, len(fds))
	fan := func(cmd []byte) (time.Duration, error) {
		t0 := time.Now()
		clear(got)
		for _, fd := range fds {
			if _, err := syscall.Write(fd, cmd); err != nil {
				return 0, err
			}
		}
		var elapsed time.Duration
		for len(got) < len(fds) {
			k, err := syscall.EpollWait(epfd, evs, 5000)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || k == 0 {
				return 0, fmt.Errorf("epoll_wait: %v (%d events)", err, k)
			}
			for _, ev := range evs[:k] {
				if m, _ := syscall.Read(int(ev.Fd), buf); m > 0 {
					got[ev.Fd] = true
				}
			}
			if elapsed == 0 && len(got) >= quorum {
				elapsed = time.Since(t0)
			}
		}
		return elapsed, nil
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		k := "k" + strconv.Itoa(i)
		a, err := fan(setCmd(k))
		if err != nil {
			return nil, err
		}
		b, err := fan(delCmd(k))
		if err != nil {
			return nil, err
		}
		lat = append(lat, a+b)
	}
	return lat, nil
}
