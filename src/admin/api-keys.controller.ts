import { Controller, Delete, Get, Header, HttpCode, Param, Post, Req } from '@nestjs/common';
import type { Request } from 'express';
import { ApiError } from '../common/api-error';
import { HttpAnswer } from '../common/http-answer';
import { JsonBody } from '../common/json-body';
import { RawData } from '../common/negotiation.guard';
import type { ApiKeyListing } from '../api-keys/api-key.repository';
import { ApiKeysService } from '../api-keys/api-keys.service';
import { NewApiKeyDto } from '../api-keys/new-api-key.dto';
import { Access } from '../security/access.decorator';
import { principalOf } from '../security/principal';

const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** A key as the API shows it: times in ISO 8601, never a secret or a hash. */
function keyView(key: ApiKeyListing): Record<string, unknown> {
  return {
    id: key.id,
    principal: key.principal,
    roles: key.roles,
    createdAt: key.createdAt.toISOString(),
    createdBy: key.createdBy,
    expiresAt: key.expiresAt?.toISOString() ?? null,
    lastUsedAt: key.lastUsedAt?.toISOString() ?? null,
  };
}

/** API keys made at run time (docs/api.md#api-keys): global admins only, JSON. */
@Controller('svc/api/rest/admin/api-keys')
export class ApiKeysController {
  constructor(private readonly keys: ApiKeysService) {}

  @Post()
  @Access('globalAdmin')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async create(@Req() req: Request, @JsonBody() body: NewApiKeyDto): Promise<HttpAnswer> {
    const created = await this.keys.create(body, principalOf(req)?.id ?? null);
    return new HttpAnswer(
      { key: created.key, ...keyView(created.listing) },
      { status: 201, headers: { Location: `/svc/api/rest/admin/api-keys/${created.listing.id}` } },
    );
  }

  @Get()
  @Access('globalAdmin')
  @RawData()
  @Header('Cache-Control', 'no-store')
  async list(): Promise<{ apiKeys: Array<Record<string, unknown>> }> {
    return { apiKeys: (await this.keys.list()).map(keyView) };
  }

  @Delete(':keyId')
  @Access('globalAdmin')
  @RawData()
  @HttpCode(204)
  async revoke(@Param('keyId') keyId: string): Promise<void> {
    if (!KEY_ID.test(keyId) || !(await this.keys.revoke(keyId))) {
      throw ApiError.notFound(
        `No API key ${keyId.slice(0, 64)} (keys of API_KEYS cannot be revoked here).`,
      );
    }
  }
}
