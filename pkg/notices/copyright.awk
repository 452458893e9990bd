# The crates' part of the .deb's copyright file (Debian's machine-readable format), from
# pkg/notices/crates.txt (pkg/dist runs it): one Files paragraph per licence, naming the crates
# compiled into usr/bin/distlock that come under it (as `cargo vendor --versioned-dirs` lays
# them out), then a License paragraph with the text of each licence but MIT and Apache-2.0,
# whose paragraphs pkg/dist writes itself (their texts are in THIRD-PARTY-NOTICES.gz too).
#   awk -f pkg/notices/copyright.awk pkg/notices/crates.txt
BEGIN {
    sep = sprintf("%72s", ""); gsub(/ /, "=", sep)
    rule = sprintf("%72s", ""); gsub(/ /, "-", rule)
    nsec = 0; ncrates = 0; nids = 0
}
$0 == sep { nsec++; state = "head"; next }
nsec == 0 { next }
state == "head" {
    # "BSD 3-Clause "New" or "Revised" License (BSD-3-Clause)": the SPDX id is in the last ().
    id = $0; sub(/.*\(/, "", id); sub(/\)$/, "", id)
    if (id == "BSD-3-Clause") id = "BSD-3-clause"  # Debian's spelling
    if (!(id in seen)) { seen[id] = 1; ids[++nids] = id }
    sec_id[nsec] = id; ring_only[nsec] = 1
    state = "used"; next
}
state == "used" && $0 == "Used by:" { next }
state == "used" && $0 == rule { state = "text"; next }
state == "used" {
    krate = $1 "-" $2
    if ($1 != "ring") ring_only[nsec] = 0
    if (!(krate in licences)) { crates[++ncrates] = krate; licences[krate] = "" }
    if (index(" " licences[krate] " ", " " id " ") == 0)
        licences[krate] = licences[krate] == "" ? id : licences[krate] " " id
    next
}
state == "text" { text[nsec] = text[nsec] $0 "\n" }
END {
    # The crates under each combination of licences (ring: Apache-2.0 and ISC).
    ngroups = 0
    for (i = 1; i <= ncrates; i++) {
        n = split(licences[crates[i]], parts, " ")
        # a stable order: insertion sort
        for (a = 2; a <= n; a++) for (b = a; b > 1 && parts[b - 1] > parts[b]; b--) {
            t = parts[b]; parts[b] = parts[b - 1]; parts[b - 1] = t
        }
        key = parts[1]
        for (a = 2; a <= n; a++) key = key " and " parts[a]
        if (!(key in members)) { groups[++ngroups] = key; members[key] = "" }
        members[key] = members[key] " vendor/" crates[i] "/*"
    }
    for (g = 1; g <= ngroups; g++) {
        key = groups[g]
        printf "Files:"
        n = split(members[key], files, " ")
        for (a = 1; a <= n; a++) printf "%s%s\n", (a == 1 ? " " : "  "), files[a]
        print "Copyright: each crate's authors; their notices are in"
        print " /usr/share/doc/distlock/THIRD-PARTY-NOTICES.gz"
        print "License: " key
        print "Comment: Rust crates compiled into usr/bin/distlock (statically linked). Where a"
        print " crate offers a choice of licences, the one named here is the one distlock takes."
        print ""
    }
    for (i = 1; i <= nids; i++) {
        id = ids[i]
        if (id == "MIT" || id == "Apache-2.0") continue
        # The licence's text from a crate's licence file: ring's sections are the heads of
        # its source files, with some code after them.
        pick = 0
        for (sec = nsec; sec >= 1; sec--)
            if (sec_id[sec] == id && (pick == 0 || ring_only[pick] || !ring_only[sec])) pick = sec
        print "License: " id
        n = split(text[pick], lines, "\n")
        while (n > 0 && lines[n] ~ /^[ \t]*$/) n--
        start = 1
        while (start <= n && lines[start] ~ /^[ \t]*$/) start++
        for (a = start; a <= n; a++) print (lines[a] ~ /^[ \t]*$/ ? " ." : " " lines[a])
        print ""
    }
}
