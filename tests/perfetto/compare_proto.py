#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Compare tests/perfetto/trace.proto with Perfetto's own, field by field.

usage: PERFETTO_PROTO=path/to/perfetto_trace.proto compare_proto.py [PROJECT_PROTO]

The project's .proto is what `protoc --decode` checks the dumps against, so a
field it gets wrong hides the same mistake in the writer. Perfetto publishes
its whole trace format merged into one file,
protos/perfetto/trace/perfetto_trace.proto; this compiles both files with
protoc and, for every message, field and enum value the project's file
defines, checks the name, number, type (with the message or enum it names),
label, oneof and packed encoding of Perfetto's counterpart. Messages map by
name: hybtrace_check.X is perfetto.protos.X, or the one message of that
name anywhere in Perfetto's file.

Perfetto's file comes from $PERFETTO_PROTO, else ../shared/tools/ next to
Perfetto's importer; without either it says SKIP (a user's clone has
neither, and none of Perfetto's file is kept in this project).
Prints one line, PASS / FAIL / SKIP perfetto-proto, and the mismatches.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PROJECT_PROTO = os.path.join(HERE, "trace.proto")
SHARED_PROTO = os.path.normpath(os.path.join(ROOT, "..", "shared", "tools",
                                             "perfetto_trace.proto"))
NAME = "perfetto-proto"

# FieldDescriptorProto.Type values (google/protobuf/descriptor.proto).
TYPE_NAMES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
              7: "fixed32", 8: "bool", 9: "string", 10: "group", 11: "message", 12: "bytes",
              13: "uint32", 14: "enum", 15: "sfixed32", 16: "sfixed64", 17: "sint32",
              18: "sint64"}
LABEL_NAMES = {1: "optional", 2: "required", 3: "repeated"}
# How each type goes on the wire: a mismatch inside one class still decodes (perhaps to
# another value: sint is zigzag); across classes Perfetto misreads or drops the field.
WIRE = {"int32": "varint", "int64": "varint", "uint32": "varint", "uint64": "varint",
        "bool": "varint", "enum": "varint", "sint32": "zigzag varint",
        "sint64": "zigzag varint", "fixed64": "64-bit", "sfixed64": "64-bit",
        "double": "64-bit", "fixed32": "32-bit", "sfixed32": "32-bit", "float": "32-bit",
        "string": "length-delimited", "bytes": "length-delimited",
        "message": "length-delimited", "group": "group"}
PACKABLE = {"varint", "zigzag varint", "64-bit", "32-bit"}


class Skip(Exception):
    pass


class Fail(Exception):
    pass


# A protobuf wire reader, just enough for a FileDescriptorSet.

def read_varint(buf, pos):
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise Fail("descriptor set: varint runs off the end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def fields(buf):
    """(number, value) for each field of a message: ints for varints, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise Fail("descriptor set: wire type %d" % wire)
        if pos > len(buf):
            raise Fail("descriptor set: field %d runs off the end" % number)
        yield number, value


def parse_field(buf, proto3):
    f = {"name": "", "number": 0, "label": 1, "type": 0, "type_name": "", "oneof": None,
         "packed": None}
    for n, v in fields(buf):
        if n == 1:
            f["name"] = v.decode()
        elif n == 3:
            f["number"] = v
        elif n == 4:
            f["label"] = v
        elif n == 5:
            f["type"] = v
        elif n == 6:
            f["type_name"] = v.decode()
        elif n == 8:  # FieldOptions: packed = 2
            for on, ov in fields(v):
                if on == 2:
                    f["packed"] = bool(ov)
        elif n == 9:
            f["oneof"] = v
        elif n == 17:  # proto3_optional: its oneof is synthetic, not the writer's concern
            f["proto3_optional"] = bool(v)
    type_ = TYPE_NAMES.get(f["type"], "type %d" % f["type"])
    wire = WIRE.get(type_, type_)
    packed = f["packed"]
    if packed is None:  # proto3 packs repeated scalars unless told otherwise
        packed = proto3 and f["label"] == 3 and wire in PACKABLE
    f["type"], f["wire"], f["packed"] = type_, wire, packed
    return f


def parse_enum(buf, prefix, enums):
    name, values = "", {}
    for n, v in fields(buf):
        if n == 1:
            name = v.decode()
        elif n == 2:
            vn, vnum = "", 0
            for en, ev in fields(v):
                if en == 1:
                    vn = ev.decode()
                elif en == 2:
                    vnum = ev - (1 << 64) if ev >= 1 << 63 else ev
            values[vn] = vnum
    enums[prefix + name] = values


def parse_message(buf, prefix, proto3, messages, enums):
    name, raw_fields, oneofs, nested = "", [], [], []
    for n, v in fields(buf):
        if n == 1:
            name = v.decode()
        elif n == 2:
            raw_fields.append(v)
        elif n in (3, 4):
            nested.append((n, v))
        elif n == 8:
            oneofs.append(dict(fields(v)).get(1, b"").decode())
    full = prefix + name
    msg = {}
    for raw in raw_fields:
        f = parse_field(raw, proto3)
        if f["oneof"] is not None and not f.get("proto3_optional"):
            f["oneof"] = oneofs[f["oneof"]]
        else:
            f["oneof"] = None
        msg[f["number"]] = f
    messages[full] = msg
    for n, v in nested:
        if n == 3:
            parse_message(v, full + ".", proto3, messages, enums)
        else:
            parse_enum(v, full + ".", enums)


def load(proto_path, out_dir):
    """({message full name: {number: field}}, {enum full name: {value name: number}}, package)
    of the file PROTO_PATH, compiled by protoc."""
    out = os.path.join(out_dir, os.path.basename(proto_path) + ".desc")
    p = subprocess.run(["protoc", "-I", os.path.dirname(os.path.abspath(proto_path)),
                        "--include_imports", "--descriptor_set_out=" + out,
                        os.path.abspath(proto_path)], capture_output=True, timeout=120)
    if p.returncode != 0:
        raise Fail("protoc cannot compile %s: %s"
                   % (proto_path, p.stderr.decode(errors="replace")[-500:]))
    with open(out, "rb") as f:
        data = f.read()
    messages, enums, package = {}, {}, None
    for n, file_buf in fields(data):
        if n != 1:
            continue
        top = dict((fn, fv) for fn, fv in fields(file_buf) if fn in (1, 2, 12))
        proto3 = top.get(12, b"") == b"proto3"
        pkg = top.get(2, b"").decode()
        prefix = "." + pkg + "." if pkg else "."
        # --include_imports puts the file itself last.
        package = pkg
        for fn, fv in fields(file_buf):
            if fn == 4:
                parse_message(fv, prefix, proto3, messages, enums)
            elif fn == 5:
                parse_enum(fv, prefix, enums)
    return messages, enums, package


def counterpart(name, ours_pkg, theirs_pkg, theirs):
    """Perfetto's full name for the project's type NAME, or None."""
    rel = name[len(ours_pkg) + 2:] if name.startswith("." + ours_pkg + ".") else name[1:]
    exact = "." + theirs_pkg + "." + rel
    if exact in theirs:
        return exact
    short = rel.rsplit(".", 1)[-1]
    same = [t for t in theirs if t.rsplit(".", 1)[-1] == short]
    return same[0] if len(same) == 1 else None


def compare(ours_path, theirs_path):
    with tempfile.TemporaryDirectory() as tmp:
        ours_msgs, ours_enums, ours_pkg = load(ours_path, tmp)
        theirs_msgs, theirs_enums, theirs_pkg = load(theirs_path, tmp)
    problems = []
    names = {}
    for name in list(ours_msgs) + list(ours_enums):
        table = theirs_msgs if name in ours_msgs else theirs_enums
        names[name] = counterpart(name, ours_pkg, theirs_pkg, table)
        if names[name] is None:
            problems.append("%s: Perfetto has no %s of that name (or several)"
                            % (name[1:], "message" if name in ours_msgs else "enum"))
    checked = 0
    for name, msg in sorted(ours_msgs.items()):
        if names[name] is None:
            continue
        theirs = theirs_msgs[names[name]]
        for number, f in sorted(msg.items()):
            checked += 1
            where = "%s.%s = %d" % (name[1:], f["name"], number)
            t = theirs.get(number)
            if t is None:
                problems.append("%s: Perfetto's %s has no field %d"
                                % (where, names[name][1:], number))
                continue
            diffs = []
            if f["name"] != t["name"]:
                diffs.append("name %s, Perfetto's %s" % (f["name"], t["name"]))
            if f["type"] != t["type"]:
                diffs.append("type %s, Perfetto's %s (%s)"
                             % (f["type"], t["type"],
                                "same encoding" if f["wire"] == t["wire"]
                                else "ENCODING DIFFERS: %s vs %s" % (f["wire"], t["wire"])))
            elif f["type_name"] and names.get(f["type_name"]) != t["type_name"]:
                diffs.append("type %s, Perfetto's %s" % (f["type_name"][1:], t["type_name"][1:]))
            if f["label"] != t["label"]:
                diffs.append("label %s, Perfetto's %s"
                             % (LABEL_NAMES[f["label"]], LABEL_NAMES[t["label"]]))
            if f["packed"] != t["packed"]:
                diffs.append("%spacked, Perfetto's %spacked (ENCODING DIFFERS)"
                             % ("" if f["packed"] else "not ", "" if t["packed"] else "not "))
            if f["oneof"] != t["oneof"]:
                diffs.append("oneof %s, Perfetto's %s" % (f["oneof"], t["oneof"]))
            if diffs:
                problems.append("%s: %s" % (where, "; ".join(diffs)))
    for name, values in sorted(ours_enums.items()):
        if names[name] is None:
            continue
        theirs = theirs_enums[names[name]]
        for vname, vnum in sorted(values.items(), key=lambda kv: kv[1]):
            checked += 1
            if theirs.get(vname) != vnum:
                problems.append("%s.%s = %d: Perfetto's is %r"
                                % (name[1:], vname, vnum, theirs.get(vname)))
    return checked, problems


def pinned_commit(proto_path):
    """The commit hash after "Perfetto commit" in the file's leading comment, or None."""
    header = []
    with open(proto_path) as f:
        for line in f:
            if not line.startswith("//"):
                break
            header.append(line[2:].strip())
    found = re.search(r"Perfetto commit\s+([0-9a-f]{12,40})\b", " ".join(header))
    return found.group(1) if found else None


def main(argv):
    ours = argv[1] if len(argv) > 1 else PROJECT_PROTO
    theirs = os.environ.get("PERFETTO_PROTO") or SHARED_PROTO
    try:
        if not os.path.isfile(theirs):
            raise Skip("no Perfetto perfetto_trace.proto (set PERFETTO_PROTO to "
                       "protos/perfetto/trace/perfetto_trace.proto of a Perfetto checkout; "
                       "looked for %s)" % theirs)
        if not shutil.which("protoc"):
            raise Fail("protoc is missing (make deps installs protobuf-compiler)")
        checked, problems = compare(ours, theirs)
        commit = pinned_commit(ours)
        if commit is None:
            problems.append("%s does not name the Perfetto commit it was checked against "
                            "(a header line with 'Perfetto commit <hash>')" % ours)
        if problems:
            raise Fail("%d difference%s from %s:\n  %s"
                       % (len(problems), "" if len(problems) == 1 else "s", theirs,
                          "\n  ".join(problems)))
        print("PASS %s: %d fields and enum values of %s match %s (header pins %s)"
              % (NAME, checked, os.path.relpath(ours), theirs, commit[:12]))
    except Skip as e:
        print("SKIP %s: %s" % (NAME, e))
    except Fail as e:
        print("FAIL %s: %s" % (NAME, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
