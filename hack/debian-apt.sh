# shellcheck shell=bash disable=SC2034 # APT_PRIVATE is for the sourcing script
# hack/debian-apt.sh - Debian packages fetched with a private apt state (sourced by
# hack/qemu-node.sh and hack/launcher-rootfs.sh): the host's apt sources, lists, status and
# keyrings stay as they are; the caller's cache holds what is downloaded.
#
#   debian_source SUFFIX      the apt line of suite <codename>SUFFIX ("" = the release,
#                             -backports, -updates) on the host's mirror for its own release
#   backports_source          debian_source -backports
#   apt_private DIR           a private apt state in DIR (lists, cache, an empty dpkg status,
#                             sources: the release and its backports); sets APT_PRIVATE, the
#                             apt-get options that use it

# The apt source line of suite <codename>SUFFIX: the URI (and keyring) of the host's source for its
# own release, from /etc/apt/sources.list or a deb822 file in sources.list.d.
debian_source() { # suffix
    local codename f line suffix=$1
    codename=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)
    [ -n "$codename" ] || die "no VERSION_CODENAME in /etc/os-release"
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        line=$(awk -v want="$codename" -v suffix="$suffix" '
            function flush() {
                if (deb && uri != "" && (" " suites " ") ~ (" " want " "))
                    { printf "deb %s%s %s%s main\n", key, uri, want, suffix; found = 1; exit }
                deb = 0; uri = ""; suites = ""; key = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
            tolower($1) == "uris:" { uri = $2 }
            tolower($1) == "suites:" { $1 = ""; suites = $0 }
            tolower($1) == "signed-by:" && NF == 2 { key = "[signed-by=" $2 "] " }
            END { if (!found) flush() }' "$f")
        [ -z "$line" ] || { echo "$line"; return; }
    done
    line=$(awk -v want="$codename" -v suffix="$suffix" '$1 == "deb" {
            o = ""; i = 2
            if ($2 ~ /^\[/) { while ($i !~ /\]$/) o = o $(i++) " "; o = o $(i++) " " }
            if ($(i + 1) == want) { printf "deb %s%s %s%s main\n", o, $i, want, suffix; exit } }' \
        /etc/apt/sources.list 2>/dev/null)
    [ -n "$line" ] || die "no apt source for $codename in /etc/apt/sources.list(.d) to take the mirror from"
    echo "$line"
}

backports_source() { debian_source -backports; }

# A private apt state in DIR: the release's and its backports' lists (the host's lists of the
# same files copied in first, so an update fetches little), an archive cache, an empty dpkg
# status (every dependency is resolved as for an empty system).
APT_PRIVATE=()
apt_private() { # dir
    local d=$1 f
    mkdir -p "$d"/{lists/partial,cache/archives/partial,etc/preferences.d}
    : >"$d/status"
    { debian_source "" && backports_source; } >"$d/sources.list"
    for f in /var/lib/apt/lists/*_Packages* /var/lib/apt/lists/*Release*; do
        [ -f "$f" ] && [ ! -e "$d/lists/${f##*/}" ] && cp -p "$f" "$d/lists/"
    done
    APT_PRIVATE=(-o "Dir::Etc::SourceList=$d/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::Etc::Preferences=$d/etc/preferences" -o "Dir::Etc::PreferencesParts=$d/etc/preferences.d"
        -o "Dir::State::Lists=$d/lists" -o "Dir::State::status=$d/status"
        -o "Dir::State::extended_states=$d/extended_states" -o "Dir::Cache=$d/cache"
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root
        -o "APT::Architecture=$(dpkg --print-architecture)" -o APT::Architectures::=
        -o Debug::NoLocking=1 -o Acquire::Languages=none)
}
