#!/bin/sh
# Service minio-setup (minio/mc), once MinIO is healthy: plangate's buckets, and the workers'
# own access key, allowed to list, read and write objects in those buckets and nothing else
# (no deleting, no other bucket, no administration). The root account is used here only.
#
# Buckets: plangate-artifacts (files steps pass between workers, under PLANGATE_ARTIFACTS) and
# the data buckets of PLANGATE_S3_BUCKETS (comma separated), which the workers' tools may also
# write (PLANGATE_ALLOWED_BUCKETS). Every step is safe to repeat.
#
# No bucket versioning: plangate's version-bound writes (s3.put) are conditional on the ETag a
# probe saw (If-Match / If-None-Match), which needs none.
set -eu
: "${MINIO_ROOT_USER:?}" "${MINIO_ROOT_PASSWORD:?}"
: "${PLANGATE_S3_ACCESS_KEY:?}" "${PLANGATE_S3_SECRET_KEY:?}"

mc alias set minio http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD" >/dev/null

resources=""
set -f
IFS=', '
for bucket in plangate-artifacts ${PLANGATE_S3_BUCKETS:-}; do
    mc mb --ignore-existing "minio/$bucket"
    resources="$resources${resources:+, }\"arn:aws:s3:::$bucket\", \"arn:aws:s3:::$bucket/*\""
done
unset IFS
set +f

printf '%s\n' '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow",' \
    '"Action": ["s3:GetBucketLocation", "s3:ListBucket", "s3:GetObject", "s3:PutObject"],' \
    "\"Resource\": [$resources]}]}" >/tmp/plangate-worker.json
mc admin policy create minio plangate-worker /tmp/plangate-worker.json
mc admin user add minio "$PLANGATE_S3_ACCESS_KEY" "$PLANGATE_S3_SECRET_KEY"
mc admin policy attach minio plangate-worker --user "$PLANGATE_S3_ACCESS_KEY"
