//go:build !linux

package main

import (
	"errors"
	"time"
)

func epollCycles([]string, int) ([]time.Duration, error) {
	return nil, errors.New("the epoll mode needs Linux")
}
