#!/bin/sh
# Failure test (tests/pipeline): never finish, so the host's boot timeout must fire.
echo "start=hang"
while :; do sleep 1; done
