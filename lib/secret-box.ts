import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

// AES-256-GCM envelope for secrets at rest: nonce(12) | tag(16) | ciphertext. The key id (a
// digest prefix of the master key) is stored beside each value so a rotated master key is
// detected instead of producing garbage. Associated data binds a value to its tenant and
// secret_ref, so a ciphertext copied to another row does not decrypt.

export interface SecretBox {
  readonly keyId: string;
  seal(plaintext: string, aad: string): Buffer;
  open(sealed: Buffer, aad: string, keyId: string): string;
}

export function createSecretBox(masterKeyBase64: string): SecretBox {
  const key = Buffer.from(masterKeyBase64, 'base64');
  if (key.length !== 32) throw new Error('master key must be 32 bytes');
  const keyId = createHash('sha256').update(key).digest('hex').slice(0, 16);
  return {
    keyId,
    seal(plaintext, aad) {
      const nonce = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      cipher.setAAD(Buffer.from(aad, 'utf8'));
      const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return Buffer.concat([nonce, cipher.getAuthTag(), ct]);
    },
    open(sealed, aad, storedKeyId) {
      if (storedKeyId !== keyId) throw new Error('secret was sealed under a different master key');
      const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, 12));
      decipher.setAAD(Buffer.from(aad, 'utf8'));
      decipher.setAuthTag(sealed.subarray(12, 28));
      return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
    },
  };
}

export function generateMasterKey(): string {
  return randomBytes(32).toString('base64');
}

/** Associated data that binds a sealed secret value to its tenant and reference. */
export function secretAad(tenantId: string, secretRef: string): string {
  return `${tenantId}/${secretRef}`;
}
