#!/usr/bin/env bash
# test/long/test_usb_all.sh - test/e2e/test_usb.sh with ten QMP device_add/device_del rounds on
# port 4 (USB_HOTPLUG_RUNS=10: the same name every time, the median and worst printed; make test
# takes three). In make test-long, not make test: each round is seconds of TCG guest time, make
# test's 15 minutes on 2 cores are CPU-bound (docs/testing.md), and make bench's latency section
# is where the time is measured.
USB_HOTPLUG_RUNS=10 exec bash "$(dirname "$0")/../e2e/test_usb.sh"
