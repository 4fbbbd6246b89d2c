#!/usr/bin/env python3
"""A client of countersign's seed-compatible routes, written the way the
seed's safe-rm and Claude hook clients are: the standard library only, the
body serialised with json.dumps(payload, sort_keys=True,
separators=(',', ':')) (non-ASCII escaped as \\uXXXX), and the hex
HMAC-SHA256 of exactly those bytes in X-SafeRM-Signature or
X-Claude-Signature.

Usage: client.py BASE_URL SECRET DELETE_ID EVENT_ID
       client.py dump < values.json

The first form creates one delete request and one Claude event, polls the
status of each once, and prints one JSON object with every body it sent,
every signature and every answer, for seed_test.go to check. The second
reads a JSON array and prints each value serialised as the clients sign
it, one a line.
"""

import hashlib
import hmac
import json
import sys
import urllib.error
import urllib.request


def serialise(payload):
    return json.dumps(payload, sort_keys=True, separators=(',', ':')).encode('utf-8')


def sign(secret, body):
    return hmac.new(secret.encode('utf-8'), body, hashlib.sha256).hexdigest()


def call(method, url, body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read().decode('utf-8'))
    except urllib.error.HTTPError as e:
        raw = e.read().decode('utf-8')
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw


def post_signed(base, path, header, secret, payload):
    body = serialise(payload)
    sig = sign(secret, body)
    status, answer = call('POST', base + path, body, {
        'Content-Type': 'application/json',
        header: sig,
    })
    return {'body': body.decode('ascii'), 'signature': sig, 'status': status, 'answer': answer}


def main():
    if sys.argv[1:] == ['dump']:
        for value in json.load(sys.stdin):
            sys.stdout.write(serialise(value).decode('ascii') + '\n')
        return 0
    if len(sys.argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    base, secret, delete_id, event_id = sys.argv[1].rstrip('/'), sys.argv[2], sys.argv[3], sys.argv[4]

    delete = {
        'request_id': delete_id,
        'command': 'rm -rf /srv/caf\u00e9/donn\u00e9es',
        'risk_reasons': ['recursive deletion (-r/-R)', 'protected path: /srv/caf\u00e9'],
        'affected_paths': ['/srv/caf\u00e9/donn\u00e9es'],
        'file_count': 47,
        'user': 'd\u00e9ploy',
        'hostname': 'prod-01',
        'cwd': '/home/deploy',
        'timestamp': 1700000000,
    }
    event = {
        'event_id': event_id,
        'event_type': 'tool_approval',
        'session_id': 'session-xyz',
        'tool_name': 'Bash',
        'tool_input': 'rm -rf /tmp/build \u2014 "caf\u00e9" \U0001F600',
        'timestamp': '2024-01-01T00:00:00Z',
    }

    out = {}
    out['delete'] = post_signed(base, '/api/delete-requests', 'X-SafeRM-Signature', secret, delete)
    out['delete_status'] = dict(zip(('status', 'answer'),
                                    call('GET', base + '/api/delete-requests/' + delete_id + '/status')))
    out['claude'] = post_signed(base, '/api/claude-events', 'X-Claude-Signature', secret, event)
    out['claude_status'] = dict(zip(('status', 'answer'),
                                    call('GET', base + '/api/claude-events/' + event_id + '/status')))
    print(json.dumps(out))
    return 0


if __name__ == '__main__':
    sys.exit(main())
