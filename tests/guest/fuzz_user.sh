#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# usage: fuzz_user.sh [msrbatch-fuzz options]
# The fuzzer as a member of the node's group without CAP_SYS_RAWIO (uid 1000,
# gid 4242), while root swaps two allowlists under it (every descriptor keeps
# the list it opened with; the fuzzer learns which). Prints the fuzzer's
# tally; the nodes and the empty list are put back.
a=/tests/scripts/fuzz-a.allowlist
b=/tests/scripts/fuzz-b.allowlist
chgrp 4242 /dev/msrbatch /dev/msrbatch_allowlist
chmod 0660 /dev/msrbatch
chmod 0640 /dev/msrbatch_allowlist
msrbatch allowlist load $a >/dev/null || exit 1
rm -f /tmp/fuzz-user.stop
(
	n=0
	while [ ! -e /tmp/fuzz-user.stop ]; do
		msrbatch allowlist load $b >/dev/null && msrbatch allowlist load $a >/dev/null || exit 1
		n=$((n + 2))
		sleep 0.2
	done
	echo "# root reloaded the allowlist $n times meanwhile"
) &
reloader=$!
runas 1000 4242 msrbatch-fuzz "$@"
rc=$?
touch /tmp/fuzz-user.stop
wait $reloader || rc=1
msrbatch allowlist load /dev/null >/dev/null
chgrp 0 /dev/msrbatch /dev/msrbatch_allowlist
chmod 0600 /dev/msrbatch /dev/msrbatch_allowlist
exit $rc
